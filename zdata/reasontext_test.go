package zdata

import (
	"errors"
	"strings"
	"testing"
)

// A fallback reason says its Reason once: issue 27 saw
// "no Z-data: no Z-data: zdata: no Z-data: …" in a report.
func TestReasonTextSaysItOnce(t *testing.T) {
	_, _, noTXT := NewSelector("www.example.com", 443, SelectOptions{}).Select(nil)
	_, _, badHost := NewSelector("bad..name", 443, SelectOptions{}).Select(nil)
	for _, tc := range []struct {
		err  error
		want string
	}{
		{noTXT, "no Z-data: no ztls1 TXT record for " + TXTName("www.example.com", 443)},
		{reasonErr(ReasonNoZData, reasonErr(ReasonNoZData, errors.New("zdata: none in the cache"))), "no Z-data: none in the cache"},
		{reasonErr(ReasonExpired, ErrExpired), "Z-data expired: expired"},
		{&Error{Reason: ReasonNoZData}, "no Z-data"},
		{nil, ""},
	} {
		got := ReasonText(tc.err)
		if got != tc.want {
			t.Errorf("ReasonText(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
	for _, err := range []error{noTXT, badHost} {
		if err == nil {
			t.Fatal("Select found Z-data where there is none")
		}
		for _, s := range []string{ReasonText(err), err.Error()} {
			if n := strings.Count(s, string(ReasonNoZData)); n != 1 {
				t.Errorf("%q says %q %d times", s, ReasonNoZData, n)
			}
		}
	}
}
