package tls13

import (
	"crypto"
	"fmt"

	"github.com/ztls-project/ztls/tls13/internal/alert"
	"github.com/ztls-project/ztls/tls13/internal/keyschedule"
	"github.com/ztls-project/ztls/tls13/internal/record"
	"github.com/ztls-project/ztls/tls13/internal/suite"
	"github.com/ztls-project/ztls/tls13/internal/wire"
)

// The engine is the sans-IO core shared by Conn, the TurboTLS UDP path and
// the fuzzers: bytes from the peer go in through feed, records to send
// come out of takeOutput, and what happened is reported as events. It owns
// no socket, goroutine or timer; callers serialise access to it. Work
// that may overlap other work (the client's chain check) goes through
// run, which the driver sets if it lends the engine a goroutine.
//
// The engine holds what both roles share: records, buffers, keys in use,
// the connection's state. What only one role keeps lives in that role's
// states (clientHelloParams, clientKeys and clientConnected;
// serverHandshake, serverKeys and serverConnected), except a server's
// accepted 0-RTT data (earlyIn) and rejected 0-RTT budget (skipEarly),
// which the record path reads.

// Event is something the handshake did, in the order it happened.
type Event int

const (
	EventClientHelloSent Event = iota + 1
	// EventHelloRetryRequest: a client received a HelloRetryRequest, a
	// server sent one.
	EventHelloRetryRequest
	EventServerHelloReceived
	EventHandshakeKeys
	EventEarlyDataAccepted
	EventEarlyDataRejected
	EventServerFlightSent // server: its whole first flight, incl. Finished, is queued
	EventPeerFinished
	EventHandshakeDone
	EventSessionTicket
	EventKeyUpdate // we sent a KeyUpdate (our own or the answer to a request)
	// EventPeerKeyUpdate: a KeyUpdate from the peer arrived and our read
	// side moved to its next traffic secret (RFC 8446, Section 4.6.3).
	// Its answer, when the peer requested one, is an EventKeyUpdate.
	EventPeerKeyUpdate
)

var eventNames = map[Event]string{
	EventClientHelloSent: "client_hello_sent", EventHelloRetryRequest: "hello_retry_request",
	EventServerHelloReceived: "server_hello", EventHandshakeKeys: "handshake_keys",
	EventEarlyDataAccepted: "early_data_accepted", EventEarlyDataRejected: "early_data_rejected",
	EventServerFlightSent: "server_flight_sent", EventPeerFinished: "peer_finished",
	EventHandshakeDone: "handshake_done", EventSessionTicket: "session_ticket",
	EventKeyUpdate: "key_update", EventPeerKeyUpdate: "peer_key_update",
}

func (e Event) String() string {
	if n, ok := eventNames[e]; ok {
		return n
	}
	return fmt.Sprintf("event(%d)", int(e))
}

// state is one step of a handshake. Each implementation holds only what is
// valid at that point and returns the next state.
type state interface {
	handle(e *engine, typ uint8, msg []byte) (state, error)
}

// appMode says what application data the read side accepts now.
type appMode int

const (
	appNone  appMode = iota
	appEarly         // server: 0-RTT data under the client early traffic key
	appData          // ordinary (or 0.5-RTT, on the client) application data
)

type engine struct {
	cfg      *Config
	isClient bool
	st       state
	err      error // sticky

	deframer       record.Deframer
	hsIn           wire.HandshakeBuffer
	rin            *record.HalfConn // nil: plaintext
	rout           *record.HalfConn
	readKeyChanged bool

	out   []byte // protected records ready for the transport
	hsOut []byte // handshake messages not yet put into records

	mode    appMode
	app     []byte // received application data, read up to appOff
	appOff  int
	appLent bool         // app is plaintext in the deframer's buffer (keepApp)
	appBuf  []byte       // the engine's own buffer for app while it is lent
	earlyIn *earlyIntake // server: accepted 0-RTT data (nil: none accepted)
	// skipEarly (server rejecting 0-RTT): how many more bytes of the
	// client's early plaintext may be skipped, as unprotected records
	// after a HelloRetryRequest, as records under keys we don't have after
	// our flight (RFC 8446, Section 4.2.10).
	skipEarly   int
	canWriteApp bool // our application traffic keys (or 0.5-RTT) are installed

	maxRecvPlain int // our record_size_limit - 1
	maxSendPlain int // the peer's record_size_limit - 1

	peerClosed bool
	sentClose  bool
	done       bool // handshake complete

	events []Event
	evBuf  [8]Event // events' first backing array: a handshake's fit

	// Negotiated values.
	suite      *suite.Suite
	hash       crypto.Hash
	info       ConnectionState
	inSecret   []byte // current read application traffic secret (KeyUpdate)
	outSecret  []byte
	exporter   []byte
	serverName string // client: the name verified; server: the SNI received

	// run runs job, beside the caller when the driver lends a goroutine
	// (Conn does: runConcurrently), else at once (runNow), and returns a
	// function that waits for it.
	run func(job func()) (wait func())

	// KeyUpdate flood bounds: a requested update is answered by one
	// KeyUpdate, sent before our next application data record (RFC 8446,
	// Section 4.6.3), however many requests came, in however many reads,
	// while we were silent; and a peer that sends many KeyUpdates and no
	// data is cut off.
	kuReplyPending bool
	kuSinceData    int

	// Records that carry nothing (change_cipher_spec, empty application
	// data) and warning alerts, counted since the last record that did.
	emptyRecords  int
	warningAlerts int
}

// Bounds on what a peer may send without making progress, so it cannot
// keep the engine busy forever (RFC 8446 allows each of them, but not
// without limit).
const (
	// maxKeyUpdatesWithoutData bounds the KeyUpdates a peer may send in a
	// row without application data in between: each costs a key
	// derivation. BoringSSL allows 32 (kMaxKeyUpdates).
	maxKeyUpdatesWithoutData = 32
	// maxEmptyRecords bounds consecutive records without content:
	// change_cipher_spec records (RFC 8446, Section 5 lets each be
	// dropped) and empty application data (Section 5.1 lets it be sent).
	// OpenSSL (MAX_EMPTY_RECORDS) and BoringSSL (kMaxEmptyRecords) allow 32.
	maxEmptyRecords = 32
	// maxWarningAlerts bounds consecutive user_canceled alerts, the only
	// warning TLS 1.3 has (RFC 8446, Section 6.1). BoringSSL allows 4
	// (kMaxWarningAlerts).
	maxWarningAlerts = 4
)

func newEngine(cfg *Config, isClient bool) *engine {
	e := &engine{cfg: cfg, isClient: isClient, run: runNow}
	e.events = e.evBuf[:0]
	e.maxRecvPlain = cfg.recordSizeLimit() - 1
	e.maxSendPlain = record.MaxPlaintext
	if cfg.MaxHandshakeMessage > 0 {
		e.hsIn.Max = cfg.MaxHandshakeMessage
	}
	return e
}

// runNow runs job on the caller's goroutine: the engine's default.
func runNow(job func()) (wait func()) {
	job()
	return func() {}
}

// earlyIntake is a server's accepted 0-RTT data (RFC 8446, Section
// 4.2.10), received under the client early traffic key and read with
// ReadEarlyData.
type earlyIntake struct {
	buf      []byte // received, not yet read
	off      int
	received int  // plaintext bytes so far
	limit    int  // max_early_data_size in force
	ended    bool // EndOfEarlyData arrived
}

// fail records a fatal error, queues its alert and returns the error.
// Every failure of the engine goes through here.
func (e *engine) fail(err error) error {
	if e.err != nil {
		return e.err
	}
	a := alert.Of(err)
	if _, ok := err.(*LocalError); !ok {
		err = &LocalError{Alert: a, Err: err}
	}
	e.err = err
	e.hsOut = nil
	e.sendAlert(a)
	return err
}

func (e *engine) sendAlert(a Alert) {
	level := byte(2)
	if a == alert.CloseNotify || a == alert.UserCanceled {
		level = 1
	}
	e.writeRecord(record.TypeAlert, []byte{level, byte(a)})
}

// writeRecord protects one record with the current write key.
func (e *engine) writeRecord(typ record.ContentType, data []byte) error {
	if e.rout == nil {
		e.out = record.AppendPlain(e.out, typ, 0x0303, data)
		return nil
	}
	var err error
	e.out, err = e.rout.Seal(e.out, typ, data, e.padding(len(data)))
	return err
}

func (e *engine) padding(n int) int {
	if e.cfg.PadTo <= 1 {
		return 0
	}
	pad := (e.cfg.PadTo - (n+1)%e.cfg.PadTo) % e.cfg.PadTo
	if n+pad > e.maxSendPlain {
		pad = e.maxSendPlain - n
	}
	if pad < 0 {
		pad = 0
	}
	return pad
}

// queueHandshake adds a handshake message to the current flight.
func (e *engine) queueHandshake(msg []byte) {
	if cap(e.hsOut) == 0 {
		// Room for a typical flight (a server's with one certificate),
		// rather than growing message by message; flushHandshake keeps
		// it for the next flight, releaseIdle drops it.
		e.hsOut = make([]byte, 0, hsFlightSize)
	}
	e.hsOut = append(e.hsOut, msg...)
}

const hsFlightSize = 1024

// flushHandshake puts the queued handshake messages into records under
// the current write key.
func (e *engine) flushHandshake() error {
	return e.flushHandshakeVersion(0x0303)
}

func (e *engine) flushHandshakeVersion(legacy uint16) error {
	for rest := e.hsOut; len(rest) > 0; {
		n := min(len(rest), e.maxSendPlain)
		if e.rout == nil {
			e.out = record.AppendPlain(e.out, record.TypeHandshake, legacy, rest[:n])
		} else if err := e.writeRecord(record.TypeHandshake, rest[:n]); err != nil {
			e.hsOut = rest
			return err
		}
		rest = rest[n:]
	}
	e.hsOut = e.hsOut[:0] // the records hold copies
	return nil
}

// sendCCS sends the dummy ChangeCipherSpec of the middlebox compatibility mode.
func (e *engine) sendCCS() {
	e.out = record.AppendPlain(e.out, record.TypeChangeCipherSpec, 0x0303, []byte{1})
}

func (e *engine) setWriteKey(secret []byte) error {
	if err := e.flushHandshake(); err != nil {
		return err
	}
	if e.rout.ProtectsWith(e.suite, secret) {
		return nil // a client's handshake key, installed at ServerHello for its alerts, again for its Finished
	}
	hc, err := record.NewHalfConn(e.suite, secret)
	if err != nil {
		return err
	}
	e.rout = hc
	return nil
}

func (e *engine) setReadKey(secret []byte) error {
	hc, err := record.NewHalfConn(e.suite, secret)
	if err != nil {
		return err
	}
	e.rin = hc
	e.readKeyChanged = true
	e.deframer.Protected = true // application_data records are TLSCiphertext from now on
	return nil
}

func (e *engine) event(ev Event) { e.events = append(e.events, ev) }

// takeOutput returns the bytes to send and forgets them. The slice is
// valid until the next call into the engine.
func (e *engine) takeOutput() []byte {
	if c, ok := e.st.(*clientConnected); ok {
		c.finishedTaken = true // our Finished leaves with this output
	}
	out := e.out
	e.out = e.out[:0]
	return out
}

// swapOutput is takeOutput for a caller that writes the bytes without
// holding the engine (Conn): it gives the engine buf's memory for its next
// output, so the caller's buffer and the engine's alternate and the
// records are not copied between them. buf must not be used afterwards.
func (e *engine) swapOutput(buf []byte) []byte {
	out := e.takeOutput()
	e.out = buf[:0]
	return out
}

// releaseIdle drops the buffers an idle connection need not hold: the
// output once taken, application data once read, the record and
// handshake input once consumed (the handshake's only after it is done).
// They are made again when used.
func (e *engine) releaseIdle() {
	if len(e.out) == 0 {
		e.out = nil
	}
	if len(e.hsOut) == 0 {
		e.hsOut = nil
	}
	if e.appBuffered() == 0 {
		e.app, e.appOff, e.appLent, e.appBuf = nil, 0, false, nil
	}
	e.deframer.Release()
	if e.done {
		e.hsIn.Release()
	}
}

// feed processes bytes received from the peer.
func (e *engine) feed(p []byte) error {
	if e.err != nil {
		return e.err
	}
	e.unlendApp()
	e.deframer.Write(p)
	return e.processRecords(false)
}

// inputSpace returns room for n bytes of input (or more) in the record
// buffer, for a caller that reads from the transport into it and then
// calls feedSpace with what it read, saving feed's copy. Nothing else may
// call into the engine's input side in between. With fit, a record buffer
// much larger than what it holds and n is given up for one that fits
// (record.Deframer.Fit). It returns nil after a failure.
func (e *engine) inputSpace(n int, fit bool) []byte {
	if e.err != nil {
		return nil
	}
	e.unlendApp()
	if fit {
		e.deframer.Fit(n)
	}
	return e.deframer.Space(n)
}

// feedSpace takes the first n bytes of the room inputSpace returned and
// processes records up to the first that leaves application data to
// read. The records behind it wait in the record buffer, not copied,
// until that data is read and resumeRecords is called: a reader of
// large chunks holds several records at once.
func (e *engine) feedSpace(n int) error {
	if e.err != nil {
		return e.err
	}
	e.deframer.Commit(n)
	return e.processRecords(true)
}

// recordsWaiting reports whether records feedSpace left behind can be
// processed: all application data before them was read.
func (e *engine) recordsWaiting() bool {
	return e.err == nil && e.appBuffered() == 0 && e.deframer.Ready()
}

// resumeRecords processes records feedSpace left behind, as feedSpace
// does.
func (e *engine) resumeRecords() error {
	if e.err != nil {
		return e.err
	}
	return e.processRecords(true)
}

// processRecords handles the complete records buffered; with untilApp it
// stops after one that leaves application data to read.
func (e *engine) processRecords(untilApp bool) error {
	for {
		typ, payload, ok, err := e.deframer.Next()
		if err != nil {
			return e.fail(err)
		}
		if !ok {
			return nil
		}
		if err := e.handleRecord(typ, payload); err != nil {
			return e.fail(err)
		}
		if e.peerClosed || untilApp && e.appBuffered() > 0 {
			return nil
		}
	}
}

func (e *engine) handleRecord(typ record.ContentType, payload []byte) error {
	switch typ {
	case record.TypeChangeCipherSpec:
		// RFC 8446, Section 5: a single 0x01 byte between the first
		// ClientHello and the peer's Finished is ignored.
		if e.done || len(payload) != 1 || payload[0] != 1 || (!e.isClient && e.st != nil && isInitialServerState(e.st)) {
			return errorf(AlertUnexpectedMessage, "unexpected ChangeCipherSpec record")
		}
		if e.hsIn.Len() > 0 {
			return errInterleaved
		}
		return e.countEmptyRecord("change_cipher_spec")
	case record.TypeAlert:
		// A peer that failed before it had keys alerts in the clear, so an
		// unprotected alert is taken until the handshake is done.
		if e.rin != nil && e.done {
			return errorf(AlertUnexpectedMessage, "unprotected alert after the handshake")
		}
		if e.hsIn.Len() > 0 {
			return errInterleaved
		}
		return e.handleAlert(payload)
	case record.TypeHandshake:
		if e.rin != nil {
			return errorf(AlertUnexpectedMessage, "unprotected handshake record after keys were installed")
		}
		if len(payload) == 0 {
			return errorf(AlertUnexpectedMessage, "empty handshake record")
		}
		e.progress()
		return e.handleHandshake(payload)
	case record.TypeApplicationData:
		if e.rin == nil {
			// RFC 8446, Sections 5 and 5.1: before keys, application data
			// is only a client's rejected 0-RTT data, which is never empty.
			if len(payload) > 0 && skipEarlyRecord(&e.skipEarly, len(payload)) {
				return nil
			}
			return errorf(AlertUnexpectedMessage, "application data before keys were installed")
		}
		n := len(payload)
		inner, plain, err := e.rin.Open(payload, e.maxRecvPlain)
		if err != nil {
			if skipEarlyRecord(&e.skipEarly, n) {
				return nil // rejected 0-RTT data under a key we don't have
			}
			return err
		}
		e.skipEarly = 0
		switch inner {
		case record.TypeHandshake:
			if len(plain) == 0 {
				return errorf(AlertUnexpectedMessage, "empty handshake record")
			}
			e.progress()
			return e.handleHandshake(plain)
		case record.TypeAlert:
			if e.hsIn.Len() > 0 {
				return errInterleaved
			}
			return e.handleAlert(plain)
		case record.TypeApplicationData:
			return e.handleAppData(plain)
		default:
			return errorf(AlertUnexpectedMessage, "unexpected content type %d inside a protected record", inner)
		}
	}
	return errorf(AlertUnexpectedMessage, "unexpected record type %d", typ)
}

// errInterleaved: RFC 8446, Section 5.1 allows no other record between
// the fragments of a handshake message.
var errInterleaved = errorf(AlertUnexpectedMessage, "record interleaved with a fragmented handshake message")

func (e *engine) handleAppData(plain []byte) error {
	if len(plain) == 0 {
		if err := e.countEmptyRecord("application data"); err != nil {
			return err
		}
	} else {
		e.progress()
	}
	if e.hsIn.Len() > 0 {
		return errorf(AlertUnexpectedMessage, "application data interleaved with a fragmented handshake message")
	}
	switch e.mode {
	case appEarly:
		in := e.earlyIn
		if in.received += len(plain); in.received > in.limit {
			return errorf(AlertUnexpectedMessage, "client sent more early data than max_early_data_size (%d)", in.limit)
		}
		in.buf = appendCompact(in.buf, &in.off, plain)
	case appData:
		e.kuSinceData = 0
		if c, ok := e.st.(*clientConnected); ok && !c.sawAppData {
			c.sawAppData = true
			e.info.AnswerInFirstFlight = !c.finishedTaken
		}
		e.keepApp(plain)
	default:
		return errorf(AlertUnexpectedMessage, "application data before the handshake finished")
	}
	return nil
}

// keepApp holds application data for readApp. When nothing else is
// waiting to be read, plain (decrypted in place in the deframer's buffer)
// is lent rather than copied, and readApp copies it out from there: in a
// bulk transfer each record's plaintext is then copied once, into the
// reader's buffer. The loan ends before the deframer's buffer is written
// again (unlendApp).
func (e *engine) keepApp(plain []byte) {
	if e.appBuffered() == 0 {
		if !e.appLent {
			e.appBuf = e.app[:0]
		}
		e.app, e.appOff, e.appLent = plain, 0, true
		return
	}
	e.unlendApp()
	e.app = appendCompact(e.app, &e.appOff, plain)
}

// unlendApp moves lent application data not yet read into the engine's
// own buffer.
func (e *engine) unlendApp() {
	if !e.appLent {
		return
	}
	rest := e.app[e.appOff:]
	e.app, e.appOff, e.appLent = append(e.appBuf[:0], rest...), 0, false
	e.appBuf = nil
}

// appendCompact appends p to buf, first dropping the already-read prefix
// so the buffer is reused in steady state.
func appendCompact(buf []byte, off *int, p []byte) []byte {
	if *off == len(buf) {
		buf = buf[:0]
		*off = 0
	} else if *off > 0 && *off > cap(buf)/2 {
		n := copy(buf, buf[*off:])
		buf = buf[:n]
		*off = 0
	}
	return append(buf, p...)
}

// skipEarlyRecord charges a rejected 0-RTT record of n ciphertext bytes
// to budget, reporting whether it fits. RFC 8446, Section 4.2.10: a server
// that rejected 0-RTT skips records up to its max_early_data_size, which
// counts plaintext: a record is charged its content and padding, all but
// the content type and the 16-byte tag every TLS 1.3 AEAD adds.
func skipEarlyRecord(budget *int, n int) bool {
	const overhead = 1 + 16
	c := max(n-overhead, 1) // an empty record still costs a decryption
	if *budget <= 0 || c > *budget {
		return false
	}
	*budget -= c
	return true
}

// progress notes a record with content: the bounds on records without
// any count again from zero.
func (e *engine) progress() {
	e.emptyRecords = 0
	e.warningAlerts = 0
}

// countEmptyRecord counts a record that carried nothing and fails past
// maxEmptyRecords in a row.
func (e *engine) countEmptyRecord(what string) error {
	if e.emptyRecords++; e.emptyRecords > maxEmptyRecords {
		return errorf(AlertUnexpectedMessage, "peer sent %d records without content in a row (last: %s)", e.emptyRecords, what)
	}
	return nil
}

func (e *engine) handleAlert(p []byte) error {
	if len(p) == 0 {
		// RFC 8446, Section 5.1: no zero-length fragments of alerts.
		return errorf(AlertUnexpectedMessage, "empty alert record")
	}
	if len(p) != 2 {
		return errorf(AlertDecodeError, "malformed alert record")
	}
	a := Alert(p[1])
	if a == AlertCloseNotify {
		e.peerClosed = true
		return nil
	}
	if a == alert.UserCanceled {
		// A warning; close_notify follows.
		if e.warningAlerts++; e.warningAlerts > maxWarningAlerts {
			return errorf(AlertUnexpectedMessage, "peer sent %d warning alerts in a row", e.warningAlerts)
		}
		return nil
	}
	e.err = &AlertError{Alert: a}
	return e.err
}

func (e *engine) handleHandshake(p []byte) error {
	e.hsIn.Write(p)
	for {
		typ, msg, ok, err := e.hsIn.Next()
		if err != nil {
			return err
		}
		if !ok {
			return nil
		}
		msg = append([]byte(nil), msg...)
		if e.st == nil {
			return errorf(AlertUnexpectedMessage, "unexpected message: got %s before the handshake started", wire.TypeName(typ))
		}
		e.readKeyChanged = false
		next, err := e.st.handle(e, typ, msg)
		if err != nil {
			return err
		}
		e.st = next
		if e.readKeyChanged && e.hsIn.Len() > 0 {
			// RFC 8446, Section 5.1: a key change must align with a record boundary.
			return errorf(AlertUnexpectedMessage, "handshake message spans a key change")
		}
	}
}

// readApp copies received application data into p.
func (e *engine) readApp(p []byte) int {
	n := copy(p, e.app[e.appOff:])
	e.appOff += n
	return n
}

func (e *engine) appBuffered() int { return len(e.app) - e.appOff }

// readEarly copies received 0-RTT data into p (server).
func (e *engine) readEarly(p []byte) int {
	in := e.earlyIn
	if in == nil {
		return 0
	}
	n := copy(p, in.buf[in.off:])
	in.off += n
	return n
}

func (e *engine) earlyBuffered() int {
	if e.earlyIn == nil {
		return 0
	}
	return len(e.earlyIn.buf) - e.earlyIn.off
}

// earlyEnded reports that no more 0-RTT data will arrive: none was
// accepted, or EndOfEarlyData came (server).
func (e *engine) earlyEnded() bool { return e.earlyIn == nil || e.earlyIn.ended }

// writeApp protects application data under the current write key.
func (e *engine) writeApp(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	if e.sentClose {
		return 0, fmt.Errorf("tls13: write after close")
	}
	if !e.canWriteApp {
		return 0, fmt.Errorf("tls13: write before the handshake")
	}
	return e.sealApp(p)
}

// sealApp protects p as application data records, as large as the
// peer's record_size_limit (and our padding) allow.
func (e *engine) sealApp(p []byte) (int, error) {
	if e.kuReplyPending && len(p) > 0 {
		if err := e.sendKeyUpdate(false); err != nil {
			return 0, err
		}
	}
	n := 0
	for n < len(p) {
		m := min(len(p)-n, e.maxSendPlain-e.padding(0))
		if m <= 0 {
			m = min(len(p)-n, e.maxSendPlain)
		}
		if err := e.writeRecord(record.TypeApplicationData, p[n:n+m]); err != nil {
			return n, e.fail(err)
		}
		n += m
		if err := e.maybeRekey(); err != nil {
			return n, err
		}
	}
	return n, nil
}

// rekeyAfter bounds the records sent under one key; AES-GCM's safety limit
// (RFC 8446, Section 5.5) is about 2^24.5 full records.
const rekeyAfter = 1 << 24

func (e *engine) maybeRekey() error {
	if e.done && e.rout != nil && e.rout.Seq() >= rekeyAfter {
		return e.sendKeyUpdate(false)
	}
	return nil
}

// sendKeyUpdate sends a KeyUpdate and moves our write side to the next
// secret. It is also the answer to the peer's pending request, which RFC
// 8446, Section 4.6.3 wants as update_not_requested: with requestPeer,
// that answer goes first.
func (e *engine) sendKeyUpdate(requestPeer bool) error {
	if !e.done {
		return fmt.Errorf("tls13: KeyUpdate before the handshake finished")
	}
	if e.kuReplyPending && requestPeer {
		if err := e.sendKeyUpdate(false); err != nil {
			return err
		}
	}
	e.kuReplyPending = false
	msg, err := (&wire.KeyUpdate{UpdateRequested: requestPeer}).Marshal()
	if err != nil {
		return e.fail(err)
	}
	e.queueHandshake(msg)
	e.outSecret = nextTrafficSecret(e.hash, e.outSecret)
	if err := e.setWriteKey(e.outSecret); err != nil {
		return e.fail(err)
	}
	e.event(EventKeyUpdate)
	return nil
}

// checkPeerFinished verifies the peer's Finished against its base key
// and the transcript hash th (RFC 8446, Section 4.4.4): verify_data is
// Hash.length bytes, else the message is malformed (decode_error,
// Section 6.2), and then it must be the MAC (decrypt_error).
func (e *engine) checkPeerFinished(baseKey, th []byte, fin *wire.Finished) error {
	if len(fin.VerifyData) != e.hash.Size() {
		return errorf(AlertDecodeError, "peer's Finished has %d bytes of verify_data, %v needs %d", len(fin.VerifyData), e.hash, e.hash.Size())
	}
	if !keyschedule.VerifyFinished(e.hash, baseKey, th, fin.VerifyData) {
		return errPeerBadFinished
	}
	return nil
}

// handleKeyUpdate is shared by both roles' connected states.
func (e *engine) handleKeyUpdate(msg []byte) error {
	ku, err := wire.ParseKeyUpdate(msg)
	if err != nil {
		return err
	}
	if e.kuSinceData++; e.kuSinceData > maxKeyUpdatesWithoutData {
		return errorf(AlertUnexpectedMessage, "peer sent %d KeyUpdates without application data", e.kuSinceData)
	}
	e.inSecret = nextTrafficSecret(e.hash, e.inSecret)
	if err := e.setReadKey(e.inSecret); err != nil {
		return err
	}
	e.event(EventPeerKeyUpdate)
	if ku.UpdateRequested && !e.sentClose {
		// RFC 8446, Section 4.6.3: the answer is due before our next
		// application data record, so it waits for it (sealApp): every
		// request that arrives before then, in this read or a later one,
		// is answered by that one KeyUpdate.
		e.kuReplyPending = true
	}
	return nil
}

// close queues close_notify.
func (e *engine) close() {
	if e.sentClose || e.err != nil {
		return
	}
	e.sentClose = true
	e.flushHandshake()
	e.sendAlert(alert.CloseNotify)
}
