package dial

// The TLS config's certificate policy decides whether the Z-data leaf is
// used, as it decides on a Certificate message (security review, points 2
// and 3): a pin that refuses it means no byte goes to the Z-data key; a
// pin that accepts it gives ZTLS with the verified chain reported.

import (
	"crypto/sha256"
	"crypto/x509"
	"errors"
	"strings"
	"testing"

	"github.com/ztls-project/ztls/internal/testsupport/lab"
)

func TestConnectZDataLeafUnderPin(t *testing.T) {
	w := startWorld(t, lab.Options{})
	leaf := w.Service.Leaf()
	pin := sha256.Sum256(leaf.RawSubjectPublicKeyInfo)
	pinned := func(want [32]byte) func(*Options) {
		return func(o *Options) {
			o.TLS.VerifyPeerCertificate = func(raws [][]byte, _ [][]*x509.Certificate) error {
				c, err := x509.ParseCertificate(raws[0])
				if err != nil || sha256.Sum256(c.RawSubjectPublicKeyInfo) != want {
					return errors.New("certificate does not match the pin")
				}
				return nil
			}
		}
	}

	r, err := connect(t, w, pinned(pin))
	if err != nil {
		t.Fatal(err)
	}
	st := r.Conn.ConnectionState()
	if r.Report.Mode != "ztls" || !st.CertificateOmitted || len(st.VerifiedChains) == 0 || !st.PeerCertificates[0].Equal(leaf) {
		t.Fatalf("pin matches: mode %s (%s), omitted %v, chains %d", r.Report.Mode, r.Report.FallbackReason, st.CertificateOmitted, len(st.VerifiedChains))
	}

	r, err = connect(t, w, pinned([32]byte{1}))
	if err == nil {
		r.Conn.Close()
		t.Fatal("a pin that refuses the server's key let the connection through")
	}
	// No ZTLS: the Z-data was refused before the first flight; the TLS
	// handshake then fails on the same pin.
	if !strings.Contains(err.Error(), "does not match the pin") {
		t.Fatalf("error %v", err)
	}
}

func TestConnectRefusesZTLSWhenServerNameDiffers(t *testing.T) {
	w := startWorld(t, lab.Options{})
	r, err := connect(t, w, func(o *Options) { o.TLS.ServerName = "other." + w.Host })
	if err == nil {
		r.Conn.Close()
		t.Fatal("handshake with a certificate for another name succeeded")
	}
	// Whatever the certificate check says (here: none), a ServerName
	// other than the dialled host means no ZTLS: the Z-data is signed for
	// the host, the certificate is checked against ServerName.
	r, err = connect(t, w, func(o *Options) {
		o.TLS.ServerName, o.TLS.InsecureSkipVerify = "front.example", true
	})
	if err != nil || r.Report.Mode != "tls" || r.Report.FallbackReason != ReasonServerName || r.Report.EarlyData.Offered {
		t.Fatalf("ServerName differs: %v %+v", err, r.Report)
	}
	// A name that differs only in case is the same name.
	r, err = connect(t, w, func(o *Options) { o.TLS.ServerName = strings.ToUpper(w.Host) })
	if err != nil || r.Report.Mode != "ztls" {
		t.Fatalf("case differs only: %v %+v", err, r)
	}
}
