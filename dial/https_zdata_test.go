package dial

import (
	"strings"
	"testing"
)

func TestParseZDataFrom(t *testing.T) {
	for _, s := range []string{"", "https", "both", "txt"} {
		if f, err := ParseZDataFrom(s); err != nil || string(f) != s {
			t.Fatalf("%q: %v", s, err)
		}
	}
	if _, err := ParseZDataFrom("HTTPS"); err == nil {
		t.Fatal("HTTPS accepted")
	}
	if ZDataFrom("").String() != "https" {
		t.Fatal("the zero value is not https")
	}
}

// TestReportZDataFromText: the text report says which record the Z-data
// came from, and why the HTTPS record's was skipped.
func TestReportZDataFromText(t *testing.T) {
	for _, tc := range []struct {
		r    Report
		want string
	}{
		{Report{Mode: "ztls", ZDataFrom: ZDataFromHTTPS}, "Z-data from the HTTPS record (key65370; no TXT query)"},
		{Report{Mode: "ztls", ZDataFrom: ZDataFromTXT, HTTPSZDataSkipped: "no Z-data: loop"}, "Z-data from the TXT record (asked after the HTTPS record: no Z-data: loop)"},
		{Report{Mode: "tls", HTTPSZDataSkipped: "no Z-data: x"}, "no Z-data from the HTTPS record: no Z-data: x"},
	} {
		var b strings.Builder
		tc.r.WriteText(&b)
		if !strings.Contains(b.String(), tc.want) {
			t.Fatalf("%+v:\n%s\nwant %q", tc.r, b.String(), tc.want)
		}
	}
	var b strings.Builder
	(&Report{Mode: "tls"}).WriteText(&b)
	if strings.Contains(b.String(), "Z-data from") {
		t.Fatalf("a report without Z-data names a record:\n%s", b.String())
	}
}
