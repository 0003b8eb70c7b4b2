package tls13

// The conformance suite: a hostile peer that speaks raw records and
// handshake messages, and a table (conformance_table_test.go,
// conformance_sections_test.go) whose rows are rules of RFC 8446 (as its
// errata correct it), RFC 8449 and RFC 7301, each labelled with its kind
// (MUST, MUST NOT, SHOULD, permitted choice, limit), with the
// conversation that breaks or exercises it and the reaction expected.
// Every row runs against the engine in each role it applies to.
//
// The hostile peer is an honest engine of the other role whose output is
// taken apart into records and handshake messages, rewritten by the row,
// and put back together under the peer's own keys (read from its key log),
// so a row can reorder, fragment, duplicate, drop, pad, mis-encrypt,
// truncate (and end the transport: eof) or lie about lengths at any point
// of a real handshake.
//
// docs/conformance.md is generated from the table and the results:
//
//	go test ./tls13 -run TestConformance -update-conformance-doc
//
// and TestConformance fails when the committed file differs.

import (
	"bufio"
	"bytes"
	"crypto/cipher"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ztls-project/ztls/tls13/internal/keyschedule"
	"github.com/ztls-project/ztls/tls13/internal/record"
	"github.com/ztls-project/ztls/tls13/internal/suite"
	"github.com/ztls-project/ztls/tls13/internal/wire"
)

var updateConformanceDoc = flag.Bool("update-conformance-doc", false, "write docs/conformance.md from the conformance table")

// role says which side the engine under test plays.
type role int

const (
	asClient role = 1 << iota
	asServer
	bothRoles = asClient | asServer
)

func (r role) String() string {
	switch r {
	case asClient:
		return "client"
	case asServer:
		return "server"
	}
	return "both"
}

// conformanceRow is one rule: what the RFC says, the conversation that
// violates it (or exercises it), and the reaction expected.
type conformanceRow struct {
	id      string // short, stable: the subtest name and the doc's row
	kind    ruleKind
	section string // "RFC 8446, Section 5.1"
	rule    string // the rule, in a few words
	roles   role   // roles of the engine under test
	setup   func(c *convOpts)
	run     func(c *conv)
	want    outcome
}

// ruleKind says what kind of rule a row checks.
type ruleKind int

const (
	// kindMust and kindMustNot: an absolute requirement of the RFC (on
	// the engine, or on its peer, whose breach the engine must catch).
	kindMust ruleKind = iota + 1
	kindMustNot
	// kindShould: a SHOULD or SHOULD NOT of the RFC that the engine follows.
	kindShould
	// kindPermitted: what the RFC allows (a MAY) or leaves to the
	// implementation; the row shows the engine takes it from its peer,
	// or what it chose.
	kindPermitted
	// kindLimit: a bound on what the RFC allows without one, so that a
	// peer cannot keep the engine busy (as OpenSSL and BoringSSL bound it).
	kindLimit
)

var kindNames = map[ruleKind]string{
	kindMust: "MUST", kindMustNot: "MUST NOT", kindShould: "SHOULD",
	kindPermitted: "permitted choice", kindLimit: "limit",
}

func (k ruleKind) String() string { return kindNames[k] }

// outcome is the reaction a row expects from the engine under test.
type outcome struct {
	alert Alert // a fatal alert sent, when check is nil
	// choice: the RFC names no alert for this breach (neither the rule
	// nor the general rules of Sections 4, 5 and 6: unexpected_message
	// for a message or record out of place, decode_error for one that
	// breaks the syntax, illegal_parameter for a syntactically valid but
	// wrong one); alert is the one ztls chose from Section 6.2.
	choice bool
	desc   string              // for behaviour rows: what must hold
	check  func(c *conv) error // behaviour rows
}

// sends expects alert a, which the RFC names for the breach.
func sends(a Alert) outcome { return outcome{alert: a} }

// chooses expects alert a, ztls's choice where the RFC names none.
func chooses(a Alert) outcome { return outcome{alert: a, choice: true} }

// source says where the expected alert comes from, for the doc.
func (o outcome) source() string {
	switch {
	case o.check != nil:
		return "–"
	case o.choice:
		return "ztls's choice"
	}
	return "named"
}

func behaves(desc string, check func(c *conv) error) outcome {
	return outcome{desc: desc, check: check}
}

func (o outcome) String() string {
	if o.check != nil {
		return o.desc
	}
	return o.alert.String()
}

// convOpts shapes one conversation's configurations before it starts.
type convOpts struct {
	t          *testing.T
	sutClient  bool // the engine under test is the client
	ccfg, scfg *Config
	resume     bool   // resume a session from an earlier handshake
	early      []byte // 0-RTT data the (peer or engine-under-test) client sends
	tamperSess func(*ClientSession)
}

// conv is one conversation between the engine under test (sut) and the
// hostile peer.
type conv struct {
	t          *testing.T
	sutClient  bool
	sut, peer  *engine
	sutLog     *keyLog
	peerLog    *keyLog
	peerReader *recordReader
	toSUT      *recordWriter
	sutOut     []byte // everything the engine under test sent
	err        error  // its first error
	closed     error  // what its Conn reported when the transport ended (eof)
	delivered  []*rec // what the peer delivered to the engine under test, in order
	sess       *ClientSession
}

// rec is one record, or one handshake message in its own record, as the
// hostile peer sees and writes it.
type rec struct {
	ct     record.ContentType // the real (inner) content type
	epoch  int                // -1: unprotected; else the index of the peer's write key
	data   []byte
	ver    uint16 // legacy_record_version in the header (0: 0x0303, unless verSet)
	verSet bool   // ver is the header's value even when 0
	// aadVer is the legacy_record_version a protected record's additional
	// data carries (0: the header's, as RFC 8446, Section 5.2 has it).
	aadVer uint16
	pad    int    // zero bytes after the inner content type
	inner  []byte // protected records: this exact TLSInnerPlaintext instead
	raw    []byte // these exact bytes on the wire instead of a record
	flip   bool   // corrupt the ciphertext
}

func (r *rec) isMsg(typ uint8) bool {
	return r.ct == record.TypeHandshake && len(r.data) > 0 && r.data[0] == typ
}

// keyLog collects an engine's NSS key log lines: the hostile peer's way
// to its own secrets and to the engine under test's.
type keyLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (k *keyLog) Write(p []byte) (int, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.buf.Write(p)
}

// secrets returns the traffic secrets one side wrote with, in order
// (early, handshake, application); prefix is "CLIENT_" or "SERVER_".
func (k *keyLog) secrets(prefix string) [][]byte {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out [][]byte
	sc := bufio.NewScanner(bytes.NewReader(k.buf.Bytes()))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 3 && strings.HasPrefix(f[0], prefix) {
			s, _ := hex.DecodeString(f[2])
			out = append(out, s)
		}
	}
	return out
}

// epochKeys derives the record keys of one side's write epochs: the
// logged secrets, then KeyUpdate successors of the last one.
type epochKeys struct {
	log    *keyLog
	prefix string
	suite  func() *suite.Suite
}

func (k *epochKeys) secret(i int) []byte {
	s := k.log.secrets(k.prefix)
	if len(s) == 0 {
		return nil
	}
	if i < len(s) {
		return s[i]
	}
	prev := k.secret(i - 1)
	if prev == nil {
		return nil
	}
	return keyschedule.NextTrafficSecret(k.suite().Hash, prev)
}

type epochAEAD struct {
	aead cipher.AEAD
	iv   []byte
	seq  uint64
}

func (k *epochKeys) aead(i int) *epochAEAD {
	secret := k.secret(i)
	s := k.suite()
	if secret == nil || s == nil || len(secret) != s.Hash.Size() {
		return nil
	}
	key, iv := keyschedule.TrafficKeys(s.Hash, s.KeyLen, secret)
	a, err := s.NewAEAD(key)
	if err != nil {
		return nil
	}
	return &epochAEAD{aead: a, iv: iv}
}

func (a *epochAEAD) nonce() []byte {
	n := bytes.Clone(a.iv)
	var s [8]byte
	binary.BigEndian.PutUint64(s[:], a.seq)
	for i := range s {
		n[len(n)-8+i] ^= s[i]
	}
	return n
}

// recordReader takes one side's byte stream apart into records, opening
// protected ones by trial with its epochs' keys, and splits handshake
// records into messages (one rec each).
type recordReader struct {
	keys  epochKeys
	d     record.Deframer
	epoch int
	open  map[int]*epochAEAD
	hs    []byte // handshake bytes not yet a whole message
}

func newRecordReader(log *keyLog, prefix string, s func() *suite.Suite) *recordReader {
	return &recordReader{keys: epochKeys{log: log, prefix: prefix, suite: s}, open: map[int]*epochAEAD{}}
}

func (r *recordReader) read(t *testing.T, stream []byte) []*rec {
	t.Helper()
	r.d.Write(stream)
	var out []*rec
	for {
		typ, payload, ok, err := r.d.Next()
		if err != nil {
			t.Fatalf("hostile peer: cannot deframe: %v", err)
		}
		if !ok {
			return out
		}
		if typ != record.TypeApplicationData {
			out = append(out, r.split(t, &rec{ct: typ, epoch: -1, data: bytes.Clone(payload)})...)
			continue
		}
		got := false
		for ep := r.epoch; ep < r.epoch+3 && !got; ep++ {
			a := r.open[ep]
			if a == nil {
				if a = r.keys.aead(ep); a == nil {
					continue
				}
				r.open[ep] = a
			}
			hdr := []byte{23, 3, 3, byte(len(payload) >> 8), byte(len(payload))}
			plain, err := a.aead.Open(nil, a.nonce(), payload, hdr)
			if err != nil {
				continue
			}
			a.seq++
			r.epoch, got = ep, true
			i := len(plain) - 1
			for i >= 0 && plain[i] == 0 {
				i--
			}
			if i < 0 {
				t.Fatal("hostile peer: record without content type")
			}
			out = append(out, r.split(t, &rec{ct: record.ContentType(plain[i]), epoch: ep, data: plain[:i]})...)
		}
		if !got {
			// Not under any key we know: keep it as it is (rejected 0-RTT).
			out = append(out, &rec{ct: record.TypeApplicationData, epoch: -1, data: bytes.Clone(payload)})
		}
	}
}

// split turns a handshake record into one rec per whole message.
func (r *recordReader) split(t *testing.T, x *rec) []*rec {
	if x.ct != record.TypeHandshake {
		return []*rec{x}
	}
	r.hs = append(r.hs, x.data...)
	var out []*rec
	for len(r.hs) >= 4 {
		n := 4 + (int(r.hs[1])<<16 | int(r.hs[2])<<8 | int(r.hs[3]))
		if len(r.hs) < n {
			break
		}
		out = append(out, &rec{ct: record.TypeHandshake, epoch: x.epoch, data: bytes.Clone(r.hs[:n])})
		r.hs = r.hs[n:]
	}
	return out
}

// recordWriter protects records under the peer's epochs with its own
// sequence numbers, so dropping or adding records keeps them consistent.
type recordWriter struct {
	keys epochKeys
	seal map[int]*epochAEAD
}

func (w *recordWriter) write(t *testing.T, out []byte, r *rec) []byte {
	t.Helper()
	if r.raw != nil {
		return append(out, r.raw...)
	}
	v := r.ver
	if v == 0 && !r.verSet {
		v = 0x0303
	}
	if r.epoch < 0 {
		out = append(out, byte(r.ct), byte(v>>8), byte(v), byte(len(r.data)>>8), byte(len(r.data)))
		return append(out, r.data...)
	}
	a := w.seal[r.epoch]
	if a == nil {
		if a = w.keys.aead(r.epoch); a == nil {
			t.Fatalf("hostile peer: no key for epoch %d", r.epoch)
		}
		w.seal[r.epoch] = a
	}
	inner := r.inner
	if inner == nil {
		inner = append(append(bytes.Clone(r.data), byte(r.ct)), make([]byte, r.pad)...)
	}
	n := len(inner) + a.aead.Overhead()
	hdr := []byte{23, byte(v >> 8), byte(v), byte(n >> 8), byte(n)}
	aad := hdr
	if r.aadVer != 0 {
		aad = []byte{23, byte(r.aadVer >> 8), byte(r.aadVer), byte(n >> 8), byte(n)}
	}
	ct := a.aead.Seal(nil, a.nonce(), inner, aad)
	a.seq++
	if r.flip {
		ct[len(ct)/2] ^= 0x20
	}
	return append(append(out, hdr...), ct...)
}

// newConv builds a conversation with the engine under test in role r and
// starts it: a client engine under test has sent its ClientHello to the
// peer; a client peer's first flight waits in peerRecs.
func newConv(t *testing.T, r role, setup func(*convOpts)) *conv {
	t.Helper()
	p := getPKI(t, "ecdsa-p256")
	o := &convOpts{t: t, sutClient: r == asClient, ccfg: clientConfig(p), scfg: serverConfig(p)}
	if setup != nil {
		setup(o)
	}
	var sess *ClientSession
	if o.resume || o.early != nil {
		sess = engineTicket(t, o.ccfg, o.scfg)
		if o.tamperSess != nil {
			o.tamperSess(sess)
		}
	}
	c := &conv{t: t, sutClient: r == asClient, sutLog: &keyLog{}, peerLog: &keyLog{}, sess: sess}
	ccfg, scfg := o.ccfg, o.scfg
	cli, srv := newEngine(ccfg, true), newEngine(scfg, false)
	if c.sutClient {
		c.sut, c.peer = cli, srv
		ccfg.KeyLogWriter, scfg.KeyLogWriter = c.sutLog, c.peerLog
	} else {
		c.sut, c.peer = srv, cli
		ccfg.KeyLogWriter, scfg.KeyLogWriter = c.peerLog, c.sutLog
	}
	peerPrefix := "SERVER_"
	if !c.sutClient {
		peerPrefix = "CLIENT_"
	}
	peerSuite := func() *suite.Suite { return c.peer.suite }
	c.peerReader = newRecordReader(c.peerLog, peerPrefix, peerSuite)
	c.toSUT = &recordWriter{keys: epochKeys{log: c.peerLog, prefix: peerPrefix, suite: peerSuite}, seal: map[int]*epochAEAD{}}
	srv.startServer()
	if err := cli.startClient(sess, nil, o.early); err != nil {
		t.Fatalf("client start: %v", err)
	}
	if c.sutClient {
		out := bytes.Clone(c.sut.takeOutput())
		c.sutOut = append(c.sutOut, out...)
		c.peer.feed(out)
	}
	return c
}

// peerRecs takes what the peer has sent since the last call, as records.
func (c *conv) peerRecs() []*rec {
	return c.peerReader.read(c.t, bytes.Clone(c.peer.takeOutput()))
}

// deliver writes recs to the engine under test and passes its answer on
// to the peer. The engine's first error is kept in c.err.
func (c *conv) deliver(recs ...*rec) error {
	c.delivered = append(c.delivered, recs...)
	var b []byte
	for _, r := range recs {
		b = c.toSUT.write(c.t, b, r)
	}
	return c.deliverBytes(b)
}

func (c *conv) deliverBytes(b []byte) error {
	err := c.sut.feed(b)
	if err != nil && c.err == nil {
		c.err = err
	}
	out := bytes.Clone(c.sut.takeOutput())
	c.sutOut = append(c.sutOut, out...)
	if c.peer.err == nil && len(out) > 0 {
		c.peer.feed(out)
	}
	return err
}

// relay passes the peer's pending flight on unchanged.
func (c *conv) relay() error { return c.deliver(c.peerRecs()...) }

// handshake relays until both sides are done (or the engine fails).
func (c *conv) handshake() error {
	for i := 0; i < 6 && !(c.sut.done && c.peer.done); i++ {
		if err := c.relay(); err != nil {
			return err
		}
	}
	if !c.sut.done || !c.peer.done {
		c.t.Fatalf("handshake did not finish (engine under test: %v, peer: %v)", c.sut.err, c.peer.err)
	}
	return c.relay() // tickets
}

// eof closes the transport after what was delivered and returns what the
// engine under test's Conn reports: Handshake's error while the handshake
// is not done, else Read's once the buffered data is read (io.EOF for a
// clean close).
func (c *conv) eof() error {
	conn := c.sutConn()
	if !c.sut.done {
		return conn.Handshake()
	}
	buf := make([]byte, 1024)
	for {
		if _, err := conn.Read(buf); err != nil {
			return err
		}
	}
}

// sutConn wraps the engine under test in a Conn whose transport has
// nothing more to read (EOF) and records what is written to it.
func (c *conv) sutConn() *Conn {
	return &Conn{conn: &eofConn{c: c}, cfg: c.sut.cfg, isClient: c.sutClient, e: c.sut, started: true}
}

// eofConn is a transport at its end: reads return io.EOF, writes go to
// the conversation's record of what the engine under test sent.
type eofConn struct{ c *conv }

func (e *eofConn) Read([]byte) (int, error) { return 0, io.EOF }
func (e *eofConn) Write(p []byte) (int, error) {
	e.c.sutOut = append(e.c.sutOut, p...)
	return len(p), nil
}
func (e *eofConn) Close() error                     { return nil }
func (e *eofConn) LocalAddr() net.Addr              { return nil }
func (e *eofConn) RemoteAddr() net.Addr             { return nil }
func (e *eofConn) SetDeadline(time.Time) error      { return nil }
func (e *eofConn) SetReadDeadline(time.Time) error  { return nil }
func (e *eofConn) SetWriteDeadline(time.Time) error { return nil }

// epoch is the peer's current write epoch for records the row makes up.
func (c *conv) epoch() int {
	if c.peer.rout == nil {
		return -1
	}
	return len(c.peerLog.secrets(c.peerPrefix())) - 1 + c.peerKeyUpdates()
}

func (c *conv) peerPrefix() string {
	if c.sutClient {
		return "SERVER_"
	}
	return "CLIENT_"
}

// peerKeyUpdates counts the peer's own KeyUpdates (beyond logged secrets).
func (c *conv) peerKeyUpdates() int {
	n := 0
	for _, ev := range c.peer.events {
		if ev == EventKeyUpdate {
			n++
		}
	}
	return n
}

// sutAlerts returns the alerts the engine under test sent, in order.
func (c *conv) sutAlerts() []Alert {
	prefix := "CLIENT_"
	if !c.sutClient {
		prefix = "SERVER_"
	}
	r := newRecordReader(c.sutLog, prefix, func() *suite.Suite { return c.sut.suite })
	var out []Alert
	for _, x := range r.read(c.t, c.sutOut) {
		if x.ct == record.TypeAlert && len(x.data) == 2 {
			out = append(out, Alert(x.data[1]))
		}
	}
	return out
}

// verdict says whether the conversation ended as the row expects.
func (c *conv) verdict(want outcome) error {
	if want.check != nil {
		return want.check(c)
	}
	if c.err == nil {
		return fmt.Errorf("no error, want a %s alert", want.alert)
	}
	var le *LocalError
	if !errors.As(c.err, &le) {
		return fmt.Errorf("error %v is not a local one, want a %s alert", c.err, want.alert)
	}
	if le.Alert != want.alert {
		return fmt.Errorf("sent %s (%v), want %s", le.Alert, c.err, want.alert)
	}
	alerts := c.sutAlerts()
	if len(alerts) == 0 || alerts[len(alerts)-1] != want.alert {
		return fmt.Errorf("the %s alert is not on the wire (alerts seen: %v)", want.alert, alerts)
	}
	return nil
}

// hsMsg builds a handshake message of type typ around body.
func hsMsg(typ uint8, body []byte) []byte {
	n := len(body)
	return append([]byte{typ, byte(n >> 16), byte(n >> 8), byte(n)}, body...)
}

// marshal is for messages the row builds; a failure is the test's.
func (c *conv) marshal(m interface{ Marshal() ([]byte, error) }) []byte {
	c.t.Helper()
	b, err := m.Marshal()
	if err != nil {
		c.t.Fatalf("marshal: %v", err)
	}
	return b
}

// find returns the index of the first handshake message of type typ.
func find(recs []*rec, typ uint8) int {
	for i, r := range recs {
		if r.isMsg(typ) {
			return i
		}
	}
	return -1
}

// must returns recs[find(recs, typ)] or fails the test.
func (c *conv) must(recs []*rec, typ uint8) *rec {
	c.t.Helper()
	i := find(recs, typ)
	if i < 0 {
		c.t.Fatalf("the peer's flight has no handshake message of type %d", typ)
	}
	return recs[i]
}

// without returns recs without the first handshake message of type typ.
func without(recs []*rec, typ uint8) []*rec {
	i := find(recs, typ)
	if i < 0 {
		return recs
	}
	return append(append([]*rec(nil), recs[:i]...), recs[i+1:]...)
}

// insertBefore puts x before the first handshake message of type typ.
func insertBefore(recs []*rec, typ uint8, x ...*rec) []*rec {
	i := find(recs, typ)
	if i < 0 {
		i = len(recs)
	}
	out := append([]*rec(nil), recs[:i]...)
	out = append(out, x...)
	return append(out, recs[i:]...)
}

func TestConformance(t *testing.T) {
	rows := conformanceTable()
	results := make(map[string]string)
	total := 0
	seen := map[string]bool{}
	for _, row := range rows {
		if seen[row.id] {
			t.Fatalf("duplicate row id %q", row.id)
		}
		if kindNames[row.kind] == "" {
			t.Fatalf("row %q has no kind", row.id)
		}
		seen[row.id] = true
		for _, r := range []role{asClient, asServer} {
			if row.roles&r == 0 {
				continue
			}
			name := row.id + "/" + r.String()
			total++
			t.Run(name, func(t *testing.T) {
				results[name] = "FAIL"
				c := newConv(t, r, row.setup)
				row.run(c)
				if err := c.verdict(row.want); err != nil {
					t.Fatalf("%s (%s): %v", row.rule, row.section, err)
				}
				results[name] = "pass"
			})
		}
	}
	doc := conformanceDoc(rows, results)
	path := filepath.Join("..", "docs", "conformance.md")
	if *updateConformanceDoc {
		if err := os.WriteFile(path, doc, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if len(results) != total {
		return // a -run filter chose some rows: the doc is about all of them
	}
	committed, err := os.ReadFile(path)
	if err != nil || !bytes.Equal(committed, doc) {
		t.Fatalf("docs/conformance.md differs from the table and its results: run go test ./tls13 -run TestConformance -update-conformance-doc")
	}
}

// conformanceDoc renders docs/conformance.md: each row with its kind,
// RFC section, where its alert comes from, the roles it ran in and the
// result of each.
func conformanceDoc(rows []conformanceRow, results map[string]string) []byte {
	var b bytes.Buffer
	b.WriteString("# RFC 8446 conformance\n\n")
	b.WriteString("Generated by `go test ./tls13 -run TestConformance -update-conformance-doc` from the table in\n")
	b.WriteString("`tls13/conformance_table_test.go` and `tls13/conformance_sections_test.go`; `go test ./tls13`\n")
	b.WriteString("fails when this file differs from the table and its results. Each row is one rule of RFC 8446\n")
	b.WriteString("(or RFC 8449, RFC 7301) run as a real conversation: a hostile peer breaks or exercises the rule\n")
	b.WriteString("in a real handshake (it rewrites an honest engine's records and messages under that engine's own\n")
	b.WriteString("keys, re-signs and re-MACs them where the rule needs a well-formed flight, or derives what it\n")
	b.WriteString("checks from the secrets with code of its own), and the engine under test must react as the\n")
	b.WriteString("Expected column says, in each role. A section followed by an erratum number takes the rule as\n")
	b.WriteString("that erratum of RFC 8446 corrects it (https://www.rfc-editor.org/errata/rfc8446).\n\n")
	b.WriteString("Kind says what the rule is: **MUST** and **MUST NOT** are absolute requirements (on the engine,\n")
	b.WriteString("or on its peer, whose breach the engine must catch); **SHOULD** is a recommendation the engine\n")
	b.WriteString("follows; **permitted choice** is what the RFC allows (a MAY) or leaves open, with what the\n")
	b.WriteString("engine takes from its peer or chose itself; **limit** is a bound the engine puts on what the RFC\n")
	b.WriteString("allows without one, so that a peer cannot keep it busy (OpenSSL's and BoringSSL's bounds).\n\n")
	b.WriteString("Alert says where an expected alert comes from: **named** when the RFC names it for the breach,\n")
	b.WriteString("in the rule itself or in its general rules (Section 4: a message out of order is an\n")
	b.WriteString("unexpected_message; Section 5: so is an unexpected record; Section 6: a message that breaks the\n")
	b.WriteString("syntax is a decode_error, one that is well formed but wrong an illegal_parameter); **ztls's\n")
	b.WriteString("choice** when it names none and ztls picked the alert whose Section 6.2 description fits.\n\n")
	b.WriteString("Not implemented, by choice: the groups x448 and ffdhe2048 to ffdhe8192 (README: \"Two kinds of\n")
	b.WriteString("named group are left out on purpose\"); the rows `group/*` show a peer offering only those.\n")
	b.WriteString("Post-handshake client authentication is not offered: the rows `pha/*` show what that means.\n\n")
	sections := map[string]bool{}
	kinds := map[ruleKind]int{}
	n, choices, named := 0, 0, 0
	for _, r := range rows {
		sections[r.section] = true
		kinds[r.kind]++
		switch r.want.source() {
		case "named":
			named++
		case "ztls's choice":
			choices++
		}
		for _, x := range []role{asClient, asServer} {
			if r.roles&x != 0 {
				n++
			}
		}
	}
	fmt.Fprintf(&b, "%d rules: %d MUST, %d MUST NOT, %d SHOULD, %d permitted choice, %d limit.\n",
		len(rows), kinds[kindMust], kinds[kindMustNot], kinds[kindShould], kinds[kindPermitted], kinds[kindLimit])
	fmt.Fprintf(&b, "%d runs (rule × role), %d sections; of the rows that expect an alert, %d alerts are named by the RFC\n", n, len(sections), named)
	fmt.Fprintf(&b, "and %d are ztls's choice.\n\n", choices)
	b.WriteString("| Row | Kind | RFC section | Rule | Expected | Alert | Client | Server |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		cell := func(x role) string {
			if r.roles&x == 0 {
				return "–"
			}
			return results[r.id+"/"+x.String()]
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s | %s | %s | %s |\n", r.id, r.kind, r.section, r.rule, r.want, r.want.source(), cell(asClient), cell(asServer))
	}
	return b.Bytes()
}

// tcpConv is a conversation whose handshake was done in memory, moved
// onto a loopback TCP connection: the engine under test reads through a
// Conn on one end, and the hostile peer writes records to the other with
// Nagle's algorithm off, each write its own segment.
type tcpConv struct {
	*conv
	sut  *Conn    // the engine under test's Conn
	peer net.Conn // the hostile peer's end
	got  chan []byte
	rerr chan error
}

// overTCP moves c, its handshake done, onto loopback TCP and starts a
// reader on the engine under test that passes on what it reads.
func (c *conv) overTCP() *tcpConv {
	c.t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		c.t.Fatal(err)
	}
	defer ln.Close()
	peer, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		c.t.Fatal(err)
	}
	end, err := ln.Accept()
	if err != nil {
		c.t.Fatal(err)
	}
	peer.(*net.TCPConn).SetNoDelay(true)
	end.(*net.TCPConn).SetNoDelay(true)
	deadline := time.Now().Add(10 * time.Second) // real time: the sockets' Deadline(s)
	peer.SetDeadline(deadline)
	end.SetDeadline(deadline)
	c.t.Cleanup(func() { peer.Close(); end.Close() })
	x := &tcpConv{conv: c, peer: peer, got: make(chan []byte, 16), rerr: make(chan error, 1),
		sut: &Conn{conn: end, cfg: c.sut.cfg, isClient: c.sutClient, e: c.sut, started: true}}
	go func() {
		buf := make([]byte, 1024)
		for {
			n, err := x.sut.Read(buf)
			if n > 0 {
				x.got <- bytes.Clone(buf[:n])
			}
			if err != nil {
				x.rerr <- err
				return
			}
		}
	}()
	return x
}

// send writes r to the engine under test in a segment of its own.
func (x *tcpConv) send(r *rec) {
	x.t.Helper()
	if _, err := x.peer.Write(x.toSUT.write(x.t, nil, r)); err != nil {
		x.t.Fatal(err)
	}
}

// waitEvents waits until the engine under test's trace holds n events ev:
// it has read what carried them.
func (x *tcpConv) waitEvents(ev Event, n int) error {
	for start := time.Now(); ; time.Sleep(time.Millisecond) { // real time: elapsed, bounded below
		if countEvents(x.sut.Trace(), ev) >= n {
			return nil
		}
		select {
		case err := <-x.rerr:
			return fmt.Errorf("the engine under test stopped reading: %v", err)
		default:
		}
		if time.Since(start) > 5*time.Second {
			return fmt.Errorf("the engine under test saw %d %s events in 5s, want %d", countEvents(x.sut.Trace(), ev), ev, n)
		}
	}
}

// readUntilData reads the engine under test's records from the socket
// (keeping them in sutOut) until one carries application data; it
// returns the records before it and the data.
func (x *tcpConv) readUntilData() ([]*rec, []byte, error) {
	prefix := "CLIENT_"
	if !x.sutClient {
		prefix = "SERVER_"
	}
	r := newRecordReader(x.sutLog, prefix, func() *suite.Suite { return x.sut.e.suite })
	r.read(x.t, x.sutOut) // what it sent in memory: the sequence numbers go on from there
	var before []*rec
	buf := make([]byte, 4096)
	for {
		n, err := x.peer.Read(buf)
		if n > 0 {
			x.sutOut = append(x.sutOut, buf[:n]...)
			for _, rc := range r.read(x.t, buf[:n]) {
				if rc.ct == record.TypeApplicationData && rc.epoch >= 0 {
					return before, rc.data, nil
				}
				before = append(before, rc)
			}
		}
		if err != nil {
			return before, nil, fmt.Errorf("reading the engine under test: %v", err)
		}
	}
}

// keyUpdateRequestsOverTCP completes the handshake, then sends n
// KeyUpdate(update_requested), each in its own TCP segment and each read
// by the engine under test before the next leaves, then makes the engine
// under test write data: RFC 8446, Section 4.6.3 asks for one KeyUpdate
// (update_not_requested) before that data, whatever number of requests
// arrived while it was silent. The peer's data under its last key is read.
func keyUpdateRequestsOverTCP(n int) func(c *conv) {
	return func(c *conv) {
		if c.handshake() != nil {
			return
		}
		ep := c.epoch()
		x := c.overTCP()
		for i := range n {
			x.send(&rec{ct: record.TypeHandshake, epoch: ep + i, data: hsMsg(wire.TypeKeyUpdate, []byte{1})})
			if err := x.waitEvents(EventPeerKeyUpdate, i+1); err != nil {
				c.err = err
				return
			}
		}
		if _, err := x.sut.Write([]byte("answer")); err != nil {
			c.err = err
			return
		}
		before, data, err := x.readUntilData()
		if err != nil {
			c.err = err
			return
		}
		c.t.Logf("records before the data: %d", len(before))
		if len(before) != 1 || !before[0].isMsg(wire.TypeKeyUpdate) || !bytes.Equal(before[0].data, hsMsg(wire.TypeKeyUpdate, []byte{0})) {
			c.err = fmt.Errorf("%d records before the data in answer to %d requests in separate segments, want one KeyUpdate(update_not_requested)", len(before), n)
			return
		}
		if string(data) != "answer" {
			c.err = fmt.Errorf("data %q, want %q", data, "answer")
			return
		}
		x.send(&rec{ct: record.TypeApplicationData, epoch: ep + n, data: []byte("ping")})
		select {
		case got := <-x.got:
			if string(got) != "ping" {
				c.err = fmt.Errorf("the engine under test read %q, want ping", got)
			}
		case err := <-x.rerr:
			c.err = fmt.Errorf("the engine under test failed reading under the peer's last key: %v", err)
		}
	}
}
