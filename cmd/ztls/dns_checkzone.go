package main

import (
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/miekg/dns"
	"github.com/spf13/cobra"

	"github.com/ztls-project/ztls/dns/authority"
	"github.com/ztls-project/ztls/internal/clock"
	"github.com/ztls-project/ztls/zdata"
)

func init() {
	var svcKey int
	cmd := &cobra.Command{
		Use:   "check-zone [ORIGIN=]FILE...",
		Short: "Check zone files the way 'dns serve' loads them, like named-checkzone",
		Long: `Load each zone file exactly as 'ztls dns serve --zone' would and report
whether it would be served: the RFC 1035 master-file syntax, one SOA at the
apex, no data outside the zone, no CNAME beside other data, no $INCLUDE.
The origin comes from the SOA record, or is given as ORIGIN=FILE. Prints
"zone ORIGIN: loaded serial N" and OK for each good file; the first problem
of a bad one, and exits 1 if any is bad.

An HTTPS or SVCB record carrying Z-data (SvcParam key65370, or
--zdata-svc-key; docs/ztls-spec.md, Section 8) is checked as a client
would: the value parses, the key is not mandatory, each record is signed
for the host and port of the record's owner (HOST for port 443,
_PORT._https.HOST otherwise) with the leaf of the zone's TLSA 3 0 0 record
at _PORT._tcp.HOST (without one the signatures cannot be checked: said,
not an error), and at least one record is valid now or later. A record
signed for another service, or all of them expired, makes the zone bad.`,
		Example: `  ztls dns check-zone example.org.zone
  ztls dns check-zone example.net.=net.db example.org.zone
  # a zone with the lines 'ztls zdata new' printed (TXT, TLSA, CERT, HTTPS)
  ztls zdata new --host www.example.org --port 443 --cert cert.pem --key key.pem --out zd/ >> example.org.zone
  ztls dns check-zone example.org.zone`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return fmt.Errorf("check-zone: give the zone files to check, as FILE or ORIGIN=FILE: %s example.org.zone", cmd.CommandPath())
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := zdata.CheckSvcParamKey(dns.SVCBKey(svcKey)); err != nil || svcKey < 0 || svcKey > 65535 {
				return fmt.Errorf("check-zone: --zdata-svc-key %d: give the private-use key the records use, 65281 to 65534 (default %d)", svcKey, zdata.DefaultSvcParamKey)
			}
			out := cmd.OutOrStdout()
			bad := 0
			for _, arg := range args {
				z, err := loadZoneArg(arg)
				if err != nil {
					fmt.Fprintf(out, "%s: %v\n", arg, err)
					bad++
					continue
				}
				fmt.Fprintf(out, "zone %s: loaded serial %d\n", z.Origin(), z.SOA().Serial)
				if !checkZoneZData(out, arg, z, dns.SVCBKey(svcKey), clock.Now()) {
					bad++
					continue
				}
				fmt.Fprintln(out, "OK")
			}
			if bad > 0 {
				return fmt.Errorf("check-zone: %d of %d zone files would not be served", bad, len(args))
			}
			return nil
		},
	}
	cmd.Flags().IntVar(&svcKey, "zdata-svc-key", int(zdata.DefaultSvcParamKey), "the SvcParamKey carrying Z-data in HTTPS and SVCB records")
	dnsCmd.AddCommand(cmd)
}

// checkZoneZData checks every HTTPS and SVCB record of the zone file arg
// (loaded as z) that carries Z-data under key, writing a line for each,
// and reports whether all are good.
func checkZoneZData(w io.Writer, arg string, z *authority.Zone, key dns.SVCBKey, now time.Time) bool {
	_, file, explicit := strings.Cut(arg, "=")
	if !explicit {
		file = arg
	}
	text, err := os.ReadFile(file)
	if err != nil {
		fmt.Fprintf(w, "%s: %v\n", arg, err)
		return false
	}
	ok := true
	zp := dns.NewZoneParser(strings.NewReader(string(text)), z.Origin(), file)
	for rr, more := zp.Next(); more; rr, more = zp.Next() {
		var svcb *dns.SVCB
		switch v := rr.(type) {
		case *dns.HTTPS:
			svcb = &v.SVCB
		case *dns.SVCB:
			svcb = v
		default:
			continue
		}
		if msg, good := checkSvcbZData(svcb, key, z, now); msg != "" {
			fmt.Fprintf(w, "%s %s: %s\n", svcb.Hdr.Name, dns.TypeToString[svcb.Hdr.Rrtype], msg)
			ok = ok && good
		}
	}
	return ok
}

// svcService is the origin host and port an HTTPS or SVCB owner name
// stands for (RFC 9460, Section 9.1): HOST is port 443, _PORT._https.HOST
// port PORT.
func svcService(owner string) (host string, port int) {
	labels := dns.SplitDomainName(owner)
	if len(labels) > 2 && labels[1] == "_https" && strings.HasPrefix(labels[0], "_") {
		if p, err := strconv.Atoi(labels[0][1:]); err == nil && p > 0 && p < 65536 {
			return strings.Join(labels[2:], "."), p
		}
	}
	return strings.TrimSuffix(owner, "."), 443
}

// checkSvcbZData checks one record's Z-data: a message ("" when it
// carries none) and whether the zone is still good.
func checkSvcbZData(rr *dns.SVCB, key dns.SVCBKey, z *authority.Zone, now time.Time) (string, bool) {
	has := false
	for _, kv := range rr.Value {
		if kv.Key() == key {
			has = true
		}
		if m, ok := kv.(*dns.SVCBMandatory); ok {
			for _, k := range m.Code {
				if k == key {
					return fmt.Sprintf("the Z-data key %s is listed in mandatory: clients that do not know it would drop the whole record; remove it from mandatory (docs/ztls-spec.md, Section 8.1)", key), false
				}
			}
		}
	}
	if !has {
		return "", true
	}
	if rr.Priority == 0 {
		return fmt.Sprintf("AliasMode (priority 0) with Z-data under %s: clients ignore an alias's SvcParams (RFC 9460, Section 2.4.2); put the Z-data in the target's ServiceMode record", key), true
	}
	recs, err := zdata.RecordsFromSVCB(rr, key)
	if err != nil {
		return fmt.Sprintf("the Z-data under %s does not parse: %v; print it again with 'ztls zdata new' or 'ztls zdata rotate'", key, err), false
	}
	host, port := svcService(rr.Hdr.Name)
	leaf, where := zoneLeaf(z, host, port)
	valid := 0
	for i, r := range recs {
		if leaf != nil {
			if err := r.Verify(leaf, host, port); err != nil {
				return fmt.Sprintf("Z-data record %d (id %d) is not signed for %s port %d by the leaf in %s: %v (copied from another service, or signed with another certificate? publish the records of this service's directory)",
					i+1, r.ID, host, port, where, err), false
			}
		}
		if !now.After(r.NotAfter) {
			valid++
		}
	}
	if valid == 0 {
		return fmt.Sprintf("all %d Z-data records under %s expired (the last at %s): clients fall back; publish the current records ('ztls zdata rotate DIR' prints them, 'ztls dns serve --zdata DIR' serves them)",
			len(recs), key, recs[len(recs)-1].NotAfter.UTC().Format(time.RFC3339)), false
	}
	msg := fmt.Sprintf("%d Z-data record(s) under %s for %s port %d, %d valid now or later", len(recs), key, host, port, valid)
	if leaf == nil {
		return msg + "; signatures not checked: " + where, true
	}
	return msg + ", signatures verified with the leaf in " + where, true
}

// zoneLeaf is the leaf certificate of the zone's TLSA 3 0 0 record for
// host and port, and where it was found (or why there is none).
func zoneLeaf(z *authority.Zone, host string, port int) (*x509.Certificate, string) {
	name := zdata.TLSAName(host, port)
	for _, rr := range z.RRset(name, dns.TypeTLSA) {
		t := rr.(*dns.TLSA)
		if t.Usage != 3 || t.Selector != 0 || t.MatchingType != 0 {
			continue
		}
		der, err := hex.DecodeString(t.Certificate)
		if err != nil {
			continue
		}
		if c, err := x509.ParseCertificate(der); err == nil {
			return c, "TLSA " + name
		}
	}
	return nil, "no TLSA 3 0 0 record at " + name + " in this zone"
}
