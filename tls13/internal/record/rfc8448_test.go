package record

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/ztls-project/ztls/tls13/internal/alert"
	"github.com/ztls-project/ztls/tls13/internal/rfc8448"
	"github.com/ztls-project/ztls/tls13/internal/suite"
)

// step is one record of an RFC 8448 trace, in the order one side sent
// them. secret names the traffic secret protecting it ("" = plaintext).
type step struct {
	name   string
	secret string
	seq    uint64
	inner  ContentType
}

// rfc8448Flows lists every record of RFC 8448's Sections 3 and 4 by
// direction. Sequence numbers restart at zero with each traffic secret.
var rfc8448Flows = map[string][]step{
	"3/client": {
		{"client.hello", "", 0, TypeHandshake},
		{"client.finished", "client.hs_traffic_secret", 0, TypeHandshake},
		{"client.app_data", "client.ap_traffic_secret", 0, TypeApplicationData},
		{"client.alert", "client.ap_traffic_secret", 1, TypeAlert},
	},
	"3/server": {
		{"server.hello", "", 0, TypeHandshake},
		{"server.hs_flight", "server.hs_traffic_secret", 0, TypeHandshake},
		{"server.new_session_ticket", "server.ap_traffic_secret", 0, TypeHandshake},
		{"server.app_data", "server.ap_traffic_secret", 1, TypeApplicationData},
		{"server.alert", "server.ap_traffic_secret", 2, TypeAlert},
	},
	"4/client": {
		{"client.hello", "", 0, TypeHandshake},
		{"client.early_data", "client.early_traffic_secret", 0, TypeApplicationData},
		{"client.end_of_early_data", "client.early_traffic_secret", 1, TypeHandshake},
		{"client.finished", "client.hs_traffic_secret", 0, TypeHandshake},
		{"client.app_data", "client.ap_traffic_secret", 0, TypeApplicationData},
		{"client.alert", "client.ap_traffic_secret", 1, TypeAlert},
	},
	"4/server": {
		{"server.hello", "", 0, TypeHandshake},
		{"server.hs_flight", "server.hs_traffic_secret", 0, TypeHandshake},
		{"server.app_data", "server.ap_traffic_secret", 0, TypeApplicationData},
		{"server.alert", "server.ap_traffic_secret", 1, TypeAlert},
	},
}

var aes128 = suite.Lookup(suite.TLS_AES_128_GCM_SHA256)

func mustHalfConn(t testing.TB, s *suite.Suite, secret []byte, seq uint64) *HalfConn {
	t.Helper()
	h, err := NewHalfConn(s, secret)
	if err != nil {
		t.Fatal(err)
	}
	h.seq = seq
	return h
}

// TestRFC8448Records feeds each direction's records through a Deframer in
// chunks of several sizes, deprotects them with HalfConns built from the
// RFC's traffic secrets (switching keys as an endpoint would), compares the
// plaintexts with the trace, and re-seals each payload with a fresh HalfConn
// at the same sequence number, expecting the exact record bytes.
func TestRFC8448Records(t *testing.T) {
	for flow, steps := range rfc8448Flows {
		sect := flow[:2]
		var stream []byte
		for _, st := range steps {
			stream = append(stream, rfc8448.Must(t, sect+st.name+".record")...)
		}
		for _, chunk := range []int{1, 3, 5, 17, 100, len(stream)} {
			t.Run(fmt.Sprintf("%s/chunk%d", flow, chunk), func(t *testing.T) {
				var d Deframer
				var in *HalfConn
				secret := ""
				i := 0
				for off := 0; off < len(stream); off += chunk {
					d.Write(stream[off:min(off+chunk, len(stream))])
					for {
						typ, payload, ok, err := d.Next()
						if err != nil {
							t.Fatalf("record %d: %v", i, err)
						}
						if !ok {
							break
						}
						if i >= len(steps) {
							t.Fatal("more records than in the trace")
						}
						st := steps[i]
						want := rfc8448.Must(t, sect+st.name+".record.payload")
						if st.secret == "" {
							if typ != st.inner || !bytes.Equal(payload, want) {
								t.Fatalf("%s: plaintext record %v %x", st.name, typ, payload)
							}
							i++
							continue
						}
						if typ != TypeApplicationData {
							t.Fatalf("%s: outer type %v", st.name, typ)
						}
						if st.secret != secret {
							in = mustHalfConn(t, aes128, rfc8448.Must(t, sect+st.secret), 0)
							secret = st.secret
						}
						if in.Seq() != st.seq {
							t.Fatalf("%s: at sequence number %d, trace says %d", st.name, in.Seq(), st.seq)
						}
						inner, plain, err := in.Open(payload, MaxPlaintext)
						if err != nil {
							t.Fatalf("%s: Open: %v", st.name, err)
						}
						if inner != st.inner || !bytes.Equal(plain, want) {
							t.Fatalf("%s: Open = %v %x, want %v %x", st.name, inner, plain, st.inner, want)
						}
						i++
					}
				}
				if i != len(steps) || d.Buffered() != 0 {
					t.Fatalf("deframed %d of %d records, %d bytes left", i, len(steps), d.Buffered())
				}
			})
		}
		t.Run(flow+"/seal", func(t *testing.T) {
			for _, st := range steps {
				want := rfc8448.Must(t, sect+st.name+".record")
				payload := rfc8448.Must(t, sect+st.name+".record.payload")
				var got []byte
				if st.secret == "" {
					version := uint16(0x0303)
					if st.name == "client.hello" {
						version = 0x0301
					}
					got = AppendPlain(nil, st.inner, version, payload)
				} else {
					out := mustHalfConn(t, aes128, rfc8448.Must(t, sect+st.secret), st.seq)
					var err error
					got, err = out.Seal([]byte("prefix"), st.inner, payload, 0)
					if err != nil {
						t.Fatal(err)
					}
					if !bytes.HasPrefix(got, []byte("prefix")) {
						t.Fatal("Seal did not append to dst")
					}
					got = got[len("prefix"):]
					if out.Seq() != st.seq+1 {
						t.Errorf("%s: sequence number %d after Seal", st.name, out.Seq())
					}
				}
				if !bytes.Equal(got, want) {
					t.Errorf("%s: sealed\n%x\nwant\n%x", st.name, got, want)
				}
			}
		})
	}
}

// TestRFC8448Tampered flips each byte of a protected RFC 8448 record in
// turn: the header's length byte breaks framing or authentication, every
// other byte must fail authentication with bad_record_mac.
func TestRFC8448Tampered(t *testing.T) {
	rec := rfc8448.Must(t, "3/client.finished.record")
	secret := rfc8448.Must(t, "3/client.hs_traffic_secret")
	for i := HeaderLen; i < len(rec); i++ {
		bad := bytes.Clone(rec[HeaderLen:])
		bad[i-HeaderLen] ^= 0x01
		h := mustHalfConn(t, aes128, secret, 0)
		_, _, err := h.Open(bad, MaxPlaintext)
		var re *alert.Error
		if !errors.As(err, &re) || re.Alert != alert.BadRecordMAC {
			t.Fatalf("byte %d flipped: err = %v", i, err)
		}
		if h.Seq() != 0 {
			t.Fatal("failed Open advanced the sequence number")
		}
	}
	// Wrong sequence number and wrong key fail too.
	for _, h := range []*HalfConn{
		mustHalfConn(t, aes128, secret, 1),
		mustHalfConn(t, aes128, rfc8448.Must(t, "3/server.hs_traffic_secret"), 0),
	} {
		if _, _, err := h.Open(bytes.Clone(rec[HeaderLen:]), MaxPlaintext); alertOf(err) != alert.BadRecordMAC {
			t.Errorf("wrong key or sequence: err = %v", err)
		}
	}
	// The untouched record still opens after those failures.
	h := mustHalfConn(t, aes128, secret, 0)
	if _, _, err := h.Open(bytes.Clone(rec[HeaderLen:]), MaxPlaintext); err != nil {
		t.Fatal(err)
	}
}

func alertOf(err error) alert.Alert {
	var re *alert.Error
	if errors.As(err, &re) {
		return re.Alert
	}
	return 0
}
