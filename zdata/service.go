package zdata

import (
	"crypto/ecdh"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/ztls-project/ztls/bfe"
	"github.com/ztls-project/ztls/tls13"
)

// EpochLength is the length of a fleet epoch: epoch = Unix time / 3600.
const EpochLength = time.Hour

// DefaultMaxEarlyData is the max_early_data_size Options uses when zero.
const DefaultMaxEarlyData = 16384

// Options shape the records a Service issues. The zero value means
// x25519, 16 KiB of early data, no ALPN, no nsc, no client certificate,
// one-hour records, the next record always held one period ahead, and a
// 10 s freshness window.
type Options struct {
	Group        tls13.CurveID // GroupX25519 (0), GroupSecp256r1 or GroupX25519MLKEM768 (v3 records)
	MaxEarlyData uint32        // 0: DefaultMaxEarlyData
	ALPN         string        // early-data ALPN protocol; "" for none
	NSC          []uint16      // cipher suites the server does not support
	ClientCert   bool          // the server asks for client certificates
	Validity     time.Duration // 0: MaxValidity; fleet mode always uses EpochLength
	// LeadTime is how long before the current record's not-after the
	// next record is issued and published; 0 means Validity (always).
	LeadTime time.Duration
	// Window is the freshness window W; keys stay usable W past
	// not-after. 0 means DefaultWindow.
	Window time.Duration
	// BFEConnections, if positive, gives every key a Bloom filter
	// encryption key for that many early-data connections per period
	// (docs/ztls-spec.md, Section 7) at false-positive rate
	// BFEFalsePositiveRate (0: bfe.DefaultFalsePositiveRate), its
	// filter sized by BFESizing (zero value: bfe.FewestHashes). A v3
	// key (GroupX25519MLKEM768, or PostQuantum's) gets the period's BFE
	// key too: its record is then published with bfe= (Section 9.2).
	BFEConnections       int
	BFEFalsePositiveRate float64
	BFESizing            bfe.Sizing
	// AnnouncePQ makes a classical (x25519 or secp256r1) Service's records
	// announce that the service also publishes v3 records: bit 30 of every
	// Zdata_id set (AnnouncePQBit, docs/ztls-spec.md, Section 9.6); without
	// it bit 30 is always clear. It is refused with GroupX25519MLKEM768.
	AnnouncePQ bool
	// PostQuantum makes a classical Service also issue, for each period,
	// a v3 key of group X25519MLKEM768 (docs/ztls-spec.md, Section 9) in
	// the same keyring (with bfe= when the Service has BFE, sharing the
	// period's BFE key with the v2 twin); its classical records then
	// announce it (as AnnouncePQ). It is refused with GroupX25519MLKEM768,
	// whose records are all v3.
	PostQuantum bool
}

func (o Options) withDefaults() (Options, error) {
	if o.Group == 0 {
		o.Group = GroupX25519
	}
	if !KnownGroup(o.Group) {
		return o, fmt.Errorf("%w %d", ErrUnknownGroup, o.Group)
	}
	if o.MaxEarlyData == 0 {
		o.MaxEarlyData = DefaultMaxEarlyData
	}
	if o.ALPN != "" {
		if err := checkALPN(o.ALPN); err != nil {
			return o, err
		}
		if len(o.ALPN) > maxString-len("alpn=") {
			return o, errors.New("zdata: alpn too long")
		}
	}
	if len(formatNSC(o.NSC)) > maxString {
		return o, errors.New("zdata: nsc list too long")
	}
	if o.Validity == 0 {
		o.Validity = MaxValidity
	}
	if o.Validity < time.Minute || o.Validity > MaxValidity || o.Validity%time.Second != 0 {
		return o, fmt.Errorf("zdata: validity %v: want whole seconds from 1m to 1h", o.Validity)
	}
	if o.LeadTime <= 0 || o.LeadTime > o.Validity {
		o.LeadTime = o.Validity
	}
	if o.Window <= 0 {
		o.Window = DefaultWindow
	}
	if _, _, err := o.bfeParams(); err != nil {
		return o, fmt.Errorf("zdata: BFE: %w", err)
	}
	if o.Group == GroupX25519MLKEM768 && (o.AnnouncePQ || o.PostQuantum) {
		return o, errors.New("zdata: AnnouncePQ is for a classical service's records (x25519, secp256r1) beside a post-quantum one's; a v3 record needs no announcement")
	}
	return o, nil
}

// Service issues and rotates the Z-data of one service (host + port),
// signing with its certificate. With a Seed it runs in fleet mode: every
// server holding the same seed and certificate derives the same keys,
// Zdata_ids and records for each epoch without talking to the others.
// Fields must not change after NewService; Rotate and Issue may be called
// from one goroutine at a time while the Keyring serves lookups.
type Service struct {
	Host    string // canonical (CanonicalHost)
	Port    int
	Cert    tls13.Certificate
	Options Options // with defaults filled in
	Seed    []byte  // fleet seed; nil outside fleet mode
	Keyring *Keyring
	// Rand is the randomness of non-fleet keys and ids; nil means crypto/rand.
	Rand io.Reader
	// BFEDir is where BFE key files are generated and found (Dir sets
	// it to its keys directory); BFEServe makes Rotate and AttachBFE open
	// their key states (one process per key file: a server), with
	// BFELog, if not nil, as the fleet's shared puncture log.
	BFEDir   string
	BFEServe bool
	BFELog   bfe.PunctureLog

	leaf      *x509.Certificate
	bfeStates *bfeStates
}

// NewService checks its arguments and returns a Service with an empty
// keyring. seed enables fleet mode (at least 16 bytes; nil for none).
func NewService(host string, port int, cert tls13.Certificate, opts Options, seed []byte) (*Service, error) {
	h, err := CanonicalHost(host)
	if err != nil {
		return nil, err
	}
	if port <= 0 || port > 65535 {
		return nil, fmt.Errorf("zdata: port %d out of range", port)
	}
	if len(cert.Chain) == 0 || cert.PrivateKey == nil {
		return nil, errors.New("zdata: certificate chain and private key required")
	}
	leaf := cert.Leaf
	if leaf == nil {
		if leaf, err = x509.ParseCertificate(cert.Chain[0]); err != nil {
			return nil, fmt.Errorf("zdata: parse leaf: %v", err)
		}
	}
	if _, err := SchemeFor(leaf.PublicKey); err != nil {
		return nil, err
	}
	if seed != nil && len(seed) < 16 {
		return nil, errors.New("zdata: fleet seed shorter than 16 bytes")
	}
	if opts, err = opts.withDefaults(); err != nil {
		return nil, err
	}
	if seed != nil {
		opts.Validity = EpochLength
		if opts.LeadTime > opts.Validity {
			opts.LeadTime = opts.Validity
		}
	}
	return &Service{Host: h, Port: port, Cert: cert, Options: opts, Seed: seed,
		Keyring: NewKeyring(opts.Window), leaf: leaf, bfeStates: &bfeStates{byPath: map[string]*bfe.KeyState{}}}, nil
}

// Leaf returns the parsed leaf certificate.
func (s *Service) Leaf() *x509.Certificate { return s.leaf }

func (s *Service) rand() io.Reader {
	if s.Rand != nil {
		return s.Rand
	}
	return rand.Reader
}

// newKey signs a record for k's private side (k.Private, or k.KEM for
// a post-quantum v3 record, docs/ztls-spec.md, Section 9.2) valid from
// notBefore for the validity.
func (s *Service) newKey(k *Key, id uint32, notBefore time.Time) (*Key, error) {
	nb := notBefore.UTC().Truncate(time.Second)
	r := &Record{
		Host:         s.Host,
		Port:         s.Port,
		NotBefore:    nb,
		NotAfter:     nb.Add(s.Options.Validity),
		MaxEarlyData: s.Options.MaxEarlyData,
		ID:           id,
		Group:        s.Options.Group,
		KeyShare:     k.publicShare(),
		V3:           s.Options.Group == GroupX25519MLKEM768,
		NSC:          append([]uint16(nil), s.Options.NSC...),
		ALPN:         s.Options.ALPN,
		ClientCert:   s.Options.ClientCert,
	}
	if err := r.Sign(s.Cert.PrivateKey, s.Cert.Chain[0]); err != nil {
		return nil, err
	}
	k.Record = r
	return k, nil
}

// Issue makes a new key with a random key share and a random Zdata_id
// unused in the keyring, valid from notBefore for Options.Validity. It
// does not add the key to the keyring.
func (s *Service) Issue(notBefore time.Time, rnd io.Reader) (*Key, error) {
	if rnd == nil {
		rnd = s.rand()
	}
	k, err := s.generate(rnd)
	if err != nil {
		return nil, err
	}
	var id uint32
	for {
		var b [4]byte
		if _, err := io.ReadFull(rnd, b[:]); err != nil {
			return nil, fmt.Errorf("zdata: random id: %v", err)
		}
		id = binary.BigEndian.Uint32(b[:])
		if s.Options.Group != GroupX25519MLKEM768 {
			id = classicalID(id, s.Options.announces()) // Section 9.6: never by chance
		}
		if s.Keyring == nil || s.Keyring.Get(id) == nil {
			break
		}
	}
	return s.newKey(k, id, notBefore)
}

// generate makes a new private key of the service's group from rnd.
func (s *Service) generate(rnd io.Reader) (*Key, error) {
	if s.Options.Group == GroupX25519MLKEM768 {
		kem, err := tls13.GenerateZDataKEMKey(rnd)
		if err != nil {
			return nil, fmt.Errorf("zdata: generate key: %v", err)
		}
		return &Key{KEM: kem}, nil
	}
	curve, err := Curve(s.Options.Group)
	if err != nil {
		return nil, err
	}
	priv, err := curve.GenerateKey(rnd)
	if err != nil {
		return nil, fmt.Errorf("zdata: generate key: %v", err)
	}
	return &Key{Private: priv}, nil
}

// EpochOf returns the fleet epoch of t: Unix seconds / 3600, rounded down.
func EpochOf(t time.Time) int64 {
	u := t.Unix()
	e := u / int64(EpochLength/time.Second)
	if u < 0 && u%int64(EpochLength/time.Second) != 0 {
		e--
	}
	return e
}

// EpochID is the Zdata_id of a fleet epoch: unique per service because
// epochs are (it wraps after 2^32 hours).
func EpochID(epoch int64) uint32 { return uint32(epoch) }

// DeriveKey derives a fleet member's Z-data private key for one epoch:
// HKDF-SHA256 (RFC 5869) with the seed as input keying material, salt
// "ztls v1 fleet", and info binding the host, port, epoch and group, so
// every server with the same seed derives the same key and no key serves
// two services, epochs or groups. For secp256r1 a derived value outside
// [1, n-1] is skipped with a counter in the info.
func DeriveKey(seed []byte, host string, port int, epoch int64, group tls13.CurveID) (*ecdh.PrivateKey, error) {
	if len(seed) == 0 {
		return nil, errors.New("zdata: empty fleet seed")
	}
	curve, err := Curve(group)
	if err != nil {
		return nil, err
	}
	info := fleetKeyInfo(host, port, epoch, group)
	for counter := 0; counter < 256; counter++ {
		b, err := hkdf.Key(sha256.New, seed, []byte("ztls v1 fleet"), string(append(info, byte(counter))), 32)
		if err != nil {
			return nil, fmt.Errorf("zdata: hkdf: %v", err)
		}
		if k, err := curve.NewPrivateKey(b); err == nil {
			return k, nil
		}
	}
	return nil, errors.New("zdata: could not derive a key") // probability ~2^-8192
}

// fleetKeyInfo is DeriveKey's HKDF info before its counter byte.
func fleetKeyInfo(host string, port int, epoch int64, group tls13.CurveID) []byte {
	h := hostOrLower(host)
	info := []byte("ztls v1 fleet key")
	info = binary.BigEndian.AppendUint16(info, uint16(len(h)))
	info = append(info, h...)
	info = binary.BigEndian.AppendUint16(info, uint16(port))
	info = binary.BigEndian.AppendUint64(info, uint64(epoch))
	return binary.BigEndian.AppendUint16(info, uint16(group))
}

// Epoch returns the fleet key of an epoch: the key derived from the seed,
// Zdata_id EpochID(epoch) (with PQEpochIDBit for a post-quantum key, with
// AnnouncePQBit for a classical key that announces one, Section 9.6),
// valid from the epoch's start for one hour.
func (s *Service) Epoch(epoch int64) (*Key, error) {
	if len(s.Seed) == 0 {
		return nil, errors.New("zdata: Epoch needs a fleet seed")
	}
	start := time.Unix(epoch*int64(EpochLength/time.Second), 0)
	if s.Options.Group == GroupX25519MLKEM768 {
		kem, err := DeriveKEMKey(s.Seed, s.Host, s.Port, epoch)
		if err != nil {
			return nil, err
		}
		return s.newKey(&Key{KEM: kem}, EpochID(epoch)|PQEpochIDBit, start)
	}
	priv, err := DeriveKey(s.Seed, s.Host, s.Port, epoch, s.Options.Group)
	if err != nil {
		return nil, err
	}
	return s.newKey(&Key{Private: priv}, classicalID(EpochID(epoch), s.Options.announces()), start)
}

// slot returns the start of the validity period holding t.
func (s *Service) slot(t time.Time) time.Time {
	v := int64(s.Options.Validity / time.Second)
	u := t.Unix()
	q := u / v
	if u < 0 && u%v != 0 {
		q--
	}
	return time.Unix(q*v, 0).UTC()
}

// has reports whether the keyring holds a key for the period starting at
// start, signed by the current leaf.
func (s *Service) has(start time.Time) bool {
	lh := sha256.Sum256(s.Cert.Chain[0])
	for _, k := range s.Keyring.All() {
		r := k.Record
		if r.NotBefore.Equal(start) && r.NotAfter.Equal(start.Add(s.Options.Validity)) && r.LeafHash == lh &&
			r.Group == s.Options.Group && k.hasPrivate() {
			return true
		}
	}
	return false
}

// Rotate makes sure the keyring holds the key of the period containing
// now and, from LeadTime before that period ends, the next one; it prunes
// keys past not-after plus the window. Periods are aligned to multiples
// of Validity since the Unix epoch (fleet epochs when Validity is 1h), so
// a record's successor starts exactly when it ends and a client that
// fetched either record at any time connects. It returns the keys added.
func (s *Service) Rotate(now time.Time) (added []*Key, err error) {
	cur := s.slot(now)
	starts := []time.Time{cur}
	next := cur.Add(s.Options.Validity)
	if !now.Before(next.Add(-s.Options.LeadTime)) {
		starts = append(starts, next)
	}
	for _, start := range starts {
		for _, issuer := range s.issuers() { // the service's group, then its v3 keys (PostQuantum)
			if issuer.has(start) {
				continue
			}
			var k *Key
			if len(s.Seed) > 0 {
				k, err = issuer.Epoch(EpochOf(start))
			} else {
				k, err = issuer.Issue(start, nil)
			}
			if err != nil {
				return added, err
			}
			s.Keyring.Add(k)
			added = append(added, k)
		}
	}
	// Prune first: a key past its life has no BFE file any more (closeBFE
	// removed it), and attaching it would only fail.
	gone := s.Keyring.Prune(now)
	if _, err := s.AttachBFE(); err != nil {
		return added, err
	}
	return added, s.closeBFE(gone, now)
}

// TwinLead is how long before its record's not-before a v2 twin is
// published (docs/ztls-spec.md, Section 7.1), in place of its v1 record:
// the next period's v1 record is published a whole period ahead for v1
// clients, and in these last minutes its twin takes its place, so that
// the answer for the rollover's BFE clients is in DNS before it while the
// TXT answer never holds more than three Z-data records (under 1232
// bytes in the default profile). A publisher that issues the next record
// less than 2×TwinLead ahead (Options.LeadTime) swaps it at half its lead.
const TwinLead = 5 * time.Minute

// twinLead is TwinLead, or half the lead time when that is shorter, so
// that the next v1 record is always published for a while.
func (s *Service) twinLead() time.Duration {
	return min(TwinLead, s.Options.LeadTime/2)
}

// Records returns the records to publish at now (Keyring.Published, less
// a record at its very not-after, whose successor is valid then): each
// key's v1 record followed by its v2 twin with bfe= when it has one, but
// for a key whose not-before is still ahead: its v1 record until
// twinLead before it, then its twin instead (docs/ztls-spec.md, Section
// 7.1). So at most three classical records: the current v1 and twin, and
// one of the next period's. A v3 key with a BFE key is published with
// bfe= only (Section 9.2: no v3 record without it once its BFE key
// exists; its answer needs TCP anyway, 9.7).
func (s *Service) Records(now time.Time) []*Record {
	var out []*Record
	for _, k := range s.Keyring.Published(now) {
		r := k.Record
		switch {
		case !now.Before(r.NotAfter):
		case k.BFE == nil:
			out = append(out, r)
		case r.V3:
			out = append(out, k.BFE.Record)
		case !now.Before(r.NotBefore):
			out = append(out, r, k.BFE.Record)
		case !now.Before(r.NotBefore.Add(-s.twinLead())):
			out = append(out, k.BFE.Record)
		default:
			out = append(out, r)
		}
	}
	return out
}

// CloseBFE closes the BFE key states a serving Service holds open.
func (s *Service) CloseBFE() {
	st := s.bfeStates
	st.mu.Lock()
	defer st.mu.Unlock()
	for path, ks := range st.byPath {
		ks.Close()
		delete(st.byPath, path)
	}
}
