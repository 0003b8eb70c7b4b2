package alert

import (
	"errors"
	"fmt"
	"io"
	"testing"
)

func TestString(t *testing.T) {
	for a, want := range map[Alert]string{
		HandshakeFailure: "handshake_failure", CloseNotify: "close_notify",
		NoApplicationProtocol: "no_application_protocol", ECHRequired: "ech_required", 200: "alert(200)",
	} {
		if got := a.String(); got != want {
			t.Errorf("Alert(%d).String() = %q, want %q", uint8(a), got, want)
		}
	}
	if len(names) != 28 {
		t.Fatalf("%d alert names, want the 27 of RFC 8446, Section 6 and RFC 9849's ech_required", len(names))
	}
}

func TestErrorCarriesItsAlert(t *testing.T) {
	base := Errorf(DecodeError, "wire: %s: truncated", "ClientHello")
	if got, want := base.Error(), "tls13: wire: ClientHello: truncated (sent decode_error alert)"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	wrapped := fmt.Errorf("context: %w", base)
	if Of(wrapped) != DecodeError {
		t.Errorf("Of(wrapped) = %v, want decode_error", Of(wrapped))
	}
	if Of(io.EOF) != InternalError {
		t.Errorf("Of(io.EOF) = %v, want internal_error", Of(io.EOF))
	}
	inner := Errorf(BadCertificate, "chain: %w", io.ErrUnexpectedEOF)
	if !errors.Is(inner, io.ErrUnexpectedEOF) {
		t.Error("Errorf's %w does not unwrap")
	}
}
