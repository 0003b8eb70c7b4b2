package bench

import (
	"crypto"
	"testing"

	"github.com/ztls-project/ztls/internal/clock"

	"golang.org/x/crypto/ocsp"

	"github.com/ztls-project/ztls/internal/testsupport/testpki"
)

// The testbed's responder answers what dial's OCSP check asks: a "good"
// answer for the leaf, signed by the CA, current for the hour; a request
// that does not parse gets an error, not an answer.
func TestAnswerOCSP(t *testing.T) {
	ca := testpki.NewCA(t, "ecdsa-p256")
	leaf := ca.Issue(t, testpki.LeafOpts{DNSNames: []string{ServerName}, OCSPServer: []string{"http://192.0.2.1/"}})
	req, err := ocsp.CreateRequest(leaf.Cert, ca.Cert, &ocsp.RequestOptions{Hash: crypto.SHA256})
	if err != nil {
		t.Fatal(err)
	}
	now := clock.Now()
	der, err := answerOCSP(ca, req, now)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := ocsp.ParseResponseForCert(der, leaf.Cert, ca.Cert)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status != ocsp.Good || resp.SerialNumber.Cmp(leaf.Cert.SerialNumber) != 0 || !resp.NextUpdate.After(now) {
		t.Fatalf("answer: status %d, serial %v, next update %v", resp.Status, resp.SerialNumber, resp.NextUpdate)
	}
	if _, err := answerOCSP(ca, []byte("not a request"), now); err == nil {
		t.Fatal("a malformed request was answered")
	}
}
