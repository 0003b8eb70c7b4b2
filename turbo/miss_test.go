package turbo_test

import (
	"errors"
	"syscall"
	"testing"

	"github.com/ztls-project/ztls/tls13"
	"github.com/ztls-project/ztls/turbo"
)

// A Miss reads as the report's reason, and unwraps to its cause.
func TestMissText(t *testing.T) {
	alert := &tls13.AlertError{Alert: 110}
	for _, tc := range []struct {
		miss turbo.Miss
		want string
		name string
	}{
		{turbo.Miss{Kind: turbo.MissTimeout}, turbo.ReasonUDPTimeout, "timeout"},
		{turbo.Miss{Kind: turbo.MissIncomplete}, turbo.ReasonUDPTimeout, "incomplete"},
		{turbo.Miss{Kind: turbo.MissUDPError, Err: syscall.ECONNREFUSED}, turbo.ReasonUDPError + ": " + syscall.ECONNREFUSED.Error(), "udp_error"},
		{turbo.Miss{Kind: turbo.MissRefused, Err: alert}, turbo.ReasonFlightRefused + ": " + alert.Error(), "refused"},
		{turbo.Miss{Kind: turbo.MissAborted, Err: alert}, turbo.ReasonFlightAborted + ": " + alert.Error(), "aborted"},
		{turbo.Miss{}, turbo.ReasonUDPError, "MissKind(0)"},
	} {
		if got := tc.miss.Error(); got != tc.want {
			t.Errorf("%v: %q, want %q", tc.miss.Kind, got, tc.want)
		}
		if got := tc.miss.Kind.String(); got != tc.name {
			t.Errorf("kind %d: %q, want %q", tc.miss.Kind, got, tc.name)
		}
		if tc.miss.Err != nil && !errors.Is(&tc.miss, tc.miss.Err) {
			t.Errorf("%v does not unwrap to its cause", tc.miss.Kind)
		}
	}
}
