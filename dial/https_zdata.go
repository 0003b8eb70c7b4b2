package dial

// Z-data carried in the HTTPS record (docs/ztls-spec.md, Section 8):
// where the client looks for it (Options.ZDataFrom). What an HTTPS
// RRset says about it (zdata.FromHTTPS) and how far aliases are followed
// (zdata.AliasChain) are package zdata's, shared with prevalidate's
// Prefetch; the questions they lead to are zdata_sources.go's.

import (
	"fmt"

	"github.com/ztls-project/ztls/zdata"
)

// ZDataFrom says which DNS record a connection takes Z-data from
// (Options.ZDataFrom; docs/ztls-spec.md, Section 8.5). It is zdata.From,
// which prevalidate.Options takes too.
type ZDataFrom = zdata.From

const (
	// ZDataHTTPSFirst (the default; "" means the same) takes Z-data from
	// the HTTPS record, asked beside A and AAAA anyway, and asks for the
	// TXT record only when that answer carries none: no extra query when
	// it does, a second round trip when it does not. TLSA and CERT are
	// asked with the first questions unless the client holds a leaf for
	// the service from an earlier handshake (Memory).
	ZDataHTTPSFirst = zdata.FromHTTPSFirst
	// ZDataBoth asks for the HTTPS and TXT records at once, and takes the
	// HTTPS record's Z-data when it carries any, else the TXT record's:
	// one query more, never a second round trip.
	ZDataBoth = zdata.FromBoth
	// ZDataTXT takes Z-data from the TXT record only (Section 1), with
	// TLSA and CERT, as releases before Section 8 did.
	ZDataTXT = zdata.FromTXT
)

// ParseZDataFrom parses "https", "both" or "txt" ("" is https).
func ParseZDataFrom(s string) (ZDataFrom, error) {
	f, err := zdata.ParseFrom(s)
	if err != nil {
		return "", fmt.Errorf("dial: unknown Z-data source %q (want https, both or txt)", s)
	}
	return f, nil
}

// Report.ZDataFrom values: the record the Z-data came from.
const (
	ZDataFromHTTPS = zdata.SourceHTTPS
	ZDataFromTXT   = zdata.SourceTXT
)
