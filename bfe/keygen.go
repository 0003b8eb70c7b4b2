package bfe

import (
	"context"
	"fmt"
	"io"
	"math/big"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	bls "github.com/consensys/gnark-crypto/ecc/bls12-381"
	"github.com/consensys/gnark-crypto/ecc/bls12-381/fr"
)

// KeyGenConfig is an epoch key to generate. Params has no usable zero
// value; the other fields' zero values are the defaults.
type KeyGenConfig struct {
	Epoch  uint64
	Params Params

	// Rand is the source of alpha; nil means crypto/rand.
	Rand io.Reader

	// Workers is how many goroutines compute slots; 0 means 1, so that a
	// background generation takes one core from the handshakes, not all.
	Workers int

	// Progress, if not nil, is called after each batch of slots with the
	// number done so far, from the generating goroutines, one call at a
	// time.
	Progress func(done, total int)
}

// GenerateKey creates the key file of an epoch at path and returns its
// public key. It computes M slots sk_i = H_G1(pk, i)^alpha (a hash to curve
// and a scalar multiplication each: about a minute of one core for
// n = 2^14 at p = 2^-10), so run it in the background, an epoch ahead, never
// on a handshake's path. ctx cancels it (no file is left behind).
//
// The file is written under a temporary name, synced and then linked to
// path, which must not exist: a key file is never overwritten. The public
// point table goes to PointTablePath(path). The master secret alpha is
// zeroed before GenerateKey returns; see the package doc for what Go
// cannot promise about copies of it.
func GenerateKey(ctx context.Context, path string, cfg KeyGenConfig) (*PublicKey, error) {
	if err := cfg.Params.check(); err != nil {
		return nil, err
	}
	rand := cfg.Rand
	if rand == nil {
		rand = cryptoRand
	}
	workers := max(cfg.Workers, 1)
	if _, err := os.Lstat(path); err == nil {
		return nil, fmt.Errorf("bfe: %s exists; a key file is never overwritten", path)
	}

	alpha, err := randomScalar(rand)
	if err != nil {
		return nil, err
	}
	defer func() { alpha = fr.Element{} }()
	alphaInt := alpha.BigInt(new(big.Int))
	defer clear(alphaInt.Bits())

	var pkJac bls.G2Jac
	pkJac.ScalarMultiplicationBase(alphaInt)
	var pkPoint bls.G2Affine
	pkPoint.FromJacobian(&pkJac)
	pk := newPublicKey(SuiteBLS12381SHA256, cfg.Epoch, cfg.Params, &pkPoint)

	dir, base := filepath.Split(path)
	f, err := os.CreateTemp(dir, base+".tmp-*")
	if err != nil {
		return nil, fmt.Errorf("bfe: create key file: %w", err)
	}
	tmp := f.Name()
	ok := false
	defer func() {
		if !ok {
			f.Close()
			os.Remove(tmp)
		}
	}()
	pf, err := os.CreateTemp(dir, base+".points.tmp-*")
	if err != nil {
		return nil, fmt.Errorf("bfe: create point table: %w", err)
	}
	ptmp := pf.Name()
	defer func() {
		pf.Close()
		os.Remove(ptmp)
	}()
	if _, err := f.WriteAt(encodeKeyFileHeader(pk), 0); err != nil {
		return nil, fmt.Errorf("bfe: write key file: %w", err)
	}
	if err := f.Truncate(cfg.Params.SecretKeySize()); err != nil {
		return nil, fmt.Errorf("bfe: write key file: %w", err)
	}
	if _, err := pf.WriteAt(encodePointFileHeader(pk), 0); err != nil {
		return nil, fmt.Errorf("bfe: write point table: %w", err)
	}

	if err := generateSlots(ctx, f, pf, pk, alphaInt, workers, cfg.Progress); err != nil {
		return nil, err
	}
	for _, file := range []*os.File{pf, f} {
		if err := file.Sync(); err != nil {
			return nil, fmt.Errorf("bfe: sync key file: %w", err)
		}
		if err := file.Close(); err != nil {
			return nil, fmt.Errorf("bfe: close key file: %w", err)
		}
	}
	// The point table goes first (replacing a stale one: it is public and
	// derived from the key); the key file last, so that a key file in
	// place means a complete generation. Link, unlike rename, fails if
	// path appeared meanwhile.
	if err := os.Rename(ptmp, PointTablePath(path)); err != nil {
		return nil, fmt.Errorf("bfe: install point table: %w", err)
	}
	if err := os.Link(tmp, path); err != nil {
		return nil, fmt.Errorf("bfe: install key file: %w", err)
	}
	ok = true
	os.Remove(tmp)
	if d, err := os.Open(filepath.Clean(dir + ".")); err == nil {
		d.Sync() // make the new name durable
		d.Close()
	}
	return pk, nil
}

// randomScalar draws alpha uniformly from [1, q) by rejection: 255 random
// bits are below q about 90% of the time.
func randomScalar(rand io.Reader) (fr.Element, error) {
	var b [fr.Bytes]byte
	defer clear(b[:])
	for {
		if _, err := io.ReadFull(rand, b[:]); err != nil {
			return fr.Element{}, fmt.Errorf("bfe: key generation: %w", err)
		}
		b[0] &= 0x7f
		var e fr.Element
		if e.SetBytesCanonical(b[:]) == nil && !e.IsZero() {
			return e, nil
		}
	}
}

const keyGenBatch = 256

func generateSlots(ctx context.Context, f, pf *os.File, pk *PublicKey, alpha *big.Int, workers int, progress func(done, total int)) error {
	m := pk.params.M
	var next, done atomic.Uint32
	var progressMu sync.Mutex
	errs := make(chan error, workers)
	for range workers {
		go func() {
			buf := make([]byte, keyGenBatch*SlotSize)
			defer clear(buf)
			pbuf := make([]byte, keyGenBatch*pointSize)
			for {
				if err := ctx.Err(); err != nil {
					errs <- err
					return
				}
				first := (next.Add(1) - 1) * keyGenBatch
				if first >= m {
					errs <- nil
					return
				}
				n := min(keyGenBatch, m-first)
				for i := range n {
					h := hashToG1(&pk.digest, first+i)
					encodePoint(pbuf[i*pointSize:], &h)
					var hj, skj bls.G1Jac
					hj.FromAffine(&h)
					skj.ScalarMultiplication(&hj, alpha)
					var sk bls.G1Affine
					sk.FromJacobian(&skj)
					b := sk.Bytes()
					copy(buf[i*SlotSize:], b[:])
					clear(b[:])
					sk, skj = bls.G1Affine{}, bls.G1Jac{}
				}
				if _, err := f.WriteAt(buf[:n*SlotSize], slotOffset(first)); err != nil {
					errs <- fmt.Errorf("bfe: write key file: %w", err)
					return
				}
				if _, err := pf.WriteAt(pbuf[:n*pointSize], pointOffset(first)); err != nil {
					errs <- fmt.Errorf("bfe: write point table: %w", err)
					return
				}
				if progress != nil {
					progressMu.Lock() // so that the counts it sees only grow
					progress(int(done.Add(n)), int(m))
					progressMu.Unlock()
				}
			}
		}()
	}
	var first error
	for range workers {
		if err := <-errs; err != nil && first == nil {
			first = err
			next.Store(m) // stop the others at their next batch
		}
	}
	if first != nil && ctx.Err() != nil {
		return fmt.Errorf("bfe: key generation: %w", first)
	}
	return first
}
