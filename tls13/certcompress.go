package tls13

// Certificate compression (RFC 8879). A client lists the algorithms it can
// decompress in the compress_certificate extension of its ClientHello, a
// server in its CertificateRequest; the other side may then send its
// Certificate as a CompressedCertificate message, compressed with one of
// them. Both transcripts take the CompressedCertificate as sent (RFC 8879,
// Section 4). For ztls this matters beyond the RFC: the server's first
// flight shrinks, so TurboTLS needs fewer UDP datagrams and more flights
// fit TCP's initial congestion window.
//
// A server compresses each chain once per algorithm and keeps the result
// (compressedCache): the chain is the same for every handshake, and the
// best settings of brotli cost milliseconds.

import (
	"bytes"
	"compress/zlib"
	"fmt"
	"io"
	"sync"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/zstd"

	"github.com/ztls-project/ztls/tls13/internal/wire"
)

// CertCompressionAlgorithm is a certificate compression algorithm (RFC
// 8879, Section 3; the IANA registry "TLS Certificate Compression Algorithm
// IDs").
type CertCompressionAlgorithm uint16

// The algorithms this package implements.
const (
	CertCompressionZlib   CertCompressionAlgorithm = 1 // RFC 1950
	CertCompressionBrotli CertCompressionAlgorithm = 2 // RFC 7932
	CertCompressionZstd   CertCompressionAlgorithm = 3 // RFC 8478
)

// String returns the IANA name ("zlib", "brotli", "zstd"), or the hex
// codepoint of an algorithm this package does not know.
func (a CertCompressionAlgorithm) String() string {
	switch a {
	case CertCompressionZlib:
		return "zlib"
	case CertCompressionBrotli:
		return "brotli"
	case CertCompressionZstd:
		return "zstd"
	}
	return fmt.Sprintf("0x%04x", uint16(a))
}

func (a CertCompressionAlgorithm) supported() bool {
	return a >= CertCompressionZlib && a <= CertCompressionZstd
}

// certCompressionExtension is the compress_certificate extension for our
// ClientHello or CertificateRequest: Config.CertificateCompression, or
// nothing when it is empty.
func (c *Config) certCompressionExtension() ([]wire.Extension, error) {
	if len(c.CertificateCompression) == 0 {
		return nil, nil
	}
	var algs []uint16
	for _, a := range c.CertificateCompression {
		if !a.supported() {
			return nil, fmt.Errorf("tls13: Config.CertificateCompression lists %v, which this package does not implement", a)
		}
		if contains(algs, uint16(a)) {
			return nil, fmt.Errorf("tls13: Config.CertificateCompression lists %v twice", a)
		}
		algs = append(algs, uint16(a))
	}
	ext, err := wire.CompressCertificateExtension(algs)
	if err != nil {
		return nil, err
	}
	return []wire.Extension{ext}, nil
}

// compressCertificate returns the Certificate message raw as we send it:
// compressed with our first algorithm (Config.CertificateCompression) that
// the peer lists in the compress_certificate extension of peerExts (its
// ClientHello's or CertificateRequest's), or raw itself when there is none
// or compression would not make the message smaller.
func (e *engine) compressCertificate(raw []byte, peerExts []wire.Extension) ([]byte, error) {
	if len(e.cfg.CertificateCompression) == 0 {
		return raw, nil
	}
	offered, err := wire.FindCompressCertificate(peerExts)
	if err != nil || len(offered) == 0 {
		return raw, err
	}
	for _, a := range e.cfg.CertificateCompression {
		if !a.supported() || !contains(offered, uint16(a)) {
			continue
		}
		msg, err := compressedCertificateMessage(a, raw)
		if err != nil {
			return nil, &LocalError{Alert: AlertInternalError, Err: err}
		}
		if len(msg) >= len(raw) {
			return raw, nil
		}
		if e.isClient {
			e.info.ClientCertificateCompression = a
		} else {
			e.info.CertificateCompression = a
		}
		return msg, nil
	}
	return raw, nil
}

// readCertificateMessage reads the peer's Certificate, plain (type
// Certificate) or compressed (type CompressedCertificate, RFC 8879,
// Section 4) with an algorithm we offered in ourExts, the extensions of
// our ClientHello or CertificateRequest. The result's Raw is the message
// as received, what the transcript takes. The declared length is checked
// against the handshake message limit before anything is decompressed;
// data that does not decompress to exactly that length is a
// bad_certificate, an algorithm we did not offer an illegal_parameter.
func (e *engine) readCertificateMessage(typ uint8, msg []byte, ourExts []wire.Extension) (*wire.Certificate, error) {
	if typ == wire.TypeCertificate {
		return wire.ParseCertificate(msg)
	}
	if typ != wire.TypeCompressedCertificate {
		return nil, unexpectedMessage(typ, wire.TypeCertificate, wire.TypeCompressedCertificate)
	}
	cc, err := wire.ParseCompressedCertificate(msg)
	if err != nil {
		return nil, err
	}
	offered, err := wire.FindCompressCertificate(ourExts)
	if err != nil {
		return nil, err
	}
	a := CertCompressionAlgorithm(cc.Algorithm)
	if !contains(offered, cc.Algorithm) || !a.supported() {
		return nil, errorf(AlertIllegalParameter, "peer compressed its certificate with %v, which we did not offer", a)
	}
	limit := e.hsIn.Max
	if limit <= 0 {
		limit = wire.MaxHandshakeSize
	}
	if int(cc.UncompressedLength) > limit {
		return nil, errorf(AlertBadCertificate, "compressed certificate of %d bytes exceeds the handshake message limit of %d", cc.UncompressedLength, limit)
	}
	body, err := decompressCertificate(a, cc.Compressed, int(cc.UncompressedLength), limit)
	if err != nil {
		return nil, err
	}
	plain := make([]byte, 0, 4+len(body))
	plain = append(plain, wire.TypeCertificate, byte(len(body)>>16), byte(len(body)>>8), byte(len(body)))
	plain = append(plain, body...)
	c, err := wire.ParseCertificate(plain)
	if err != nil {
		return nil, err
	}
	c.Raw = cc.Raw
	if e.isClient {
		e.info.CertificateCompression = a
	} else {
		e.info.ClientCertificateCompression = a
	}
	return c, nil
}

// zstdMaxWindow is the largest zstd window we decode with: the 8 MiB that
// RFC 8878, Section 3.1.1.1.2 asks every decoder to support. A compressor
// that knew the input's size (as every RFC 8879 sender does) declares a
// window no larger than the certificate.
const zstdMaxWindow = 8 << 20

// decompressCertificate inflates data, which must hold exactly n bytes
// (RFC 8879, Section 4) of a Certificate message body, n at most limit.
// At most n+1 bytes are ever produced, and the decoders' windows are
// bounded (zlib 32 KiB, zstd zstdMaxWindow, brotli 16 MiB by its format),
// so a small message cannot make us allocate without bound.
func decompressCertificate(a CertCompressionAlgorithm, data []byte, n, limit int) ([]byte, error) {
	var r io.Reader
	switch a {
	case CertCompressionZlib:
		zr, err := zlib.NewReader(bytes.NewReader(data))
		if err != nil {
			return nil, errorf(AlertBadCertificate, "zlib-compressed certificate: %v", err)
		}
		defer zr.Close()
		r = zr
	case CertCompressionBrotli:
		r = brotli.NewReader(bytes.NewReader(data))
	case CertCompressionZstd:
		d, err := zstd.NewReader(bytes.NewReader(data),
			zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true),
			zstd.WithDecoderMaxWindow(zstdMaxWindow),
			zstd.WithDecoderMaxMemory(uint64(limit)+1))
		if err != nil {
			return nil, errorf(AlertBadCertificate, "zstd-compressed certificate: %v", err)
		}
		defer d.Close()
		r = d
	default:
		return nil, errorf(AlertIllegalParameter, "certificate compressed with unknown algorithm %v", a)
	}
	out, err := io.ReadAll(io.LimitReader(r, int64(n)+1))
	if err != nil {
		return nil, errorf(AlertBadCertificate, "%v-compressed certificate does not decompress: %v", a, err)
	}
	if len(out) != n {
		if len(out) > n {
			return nil, errorf(AlertBadCertificate, "%v-compressed certificate decompresses to more than its uncompressed_length %d", a, n)
		}
		return nil, errorf(AlertBadCertificate, "%v-compressed certificate decompresses to %d bytes, uncompressed_length says %d", a, len(out), n)
	}
	return out, nil
}

// compressedCache keeps CompressedCertificate messages by algorithm and
// the Certificate message they compress, so each chain is compressed once
// per process. It holds at most compressedCacheMax entries and starts
// afresh when full.
var compressedCache = struct {
	sync.Mutex
	m map[compressedKey][]byte
}{m: map[compressedKey][]byte{}}

type compressedKey struct {
	alg CertCompressionAlgorithm
	raw string
}

const compressedCacheMax = 64

// compressedCertificateMessage compresses the Certificate message raw
// (header included) with a into a CompressedCertificate message.
func compressedCertificateMessage(a CertCompressionAlgorithm, raw []byte) ([]byte, error) {
	key := compressedKey{a, string(raw)}
	compressedCache.Lock()
	msg, ok := compressedCache.m[key]
	compressedCache.Unlock()
	if ok {
		return msg, nil
	}
	body := raw[4:]
	data, err := compressCertificateBody(a, body)
	if err != nil {
		return nil, err
	}
	msg, err = (&wire.CompressedCertificate{
		Algorithm:          uint16(a),
		UncompressedLength: uint32(len(body)),
		Compressed:         data,
	}).Marshal()
	if err != nil {
		return nil, err
	}
	compressedCache.Lock()
	if len(compressedCache.m) >= compressedCacheMax {
		clear(compressedCache.m)
	}
	compressedCache.m[key] = msg
	compressedCache.Unlock()
	return msg, nil
}

// compressCertificateBody compresses with each algorithm's densest
// setting (the result is cached) and the smallest window that holds the
// whole body, so the peer's decoder needs little memory.
func compressCertificateBody(a CertCompressionAlgorithm, body []byte) ([]byte, error) {
	var buf bytes.Buffer
	switch a {
	case CertCompressionZlib:
		w, err := zlib.NewWriterLevel(&buf, zlib.BestCompression)
		if err != nil {
			return nil, err
		}
		if _, err := w.Write(body); err != nil {
			return nil, err
		}
		if err := w.Close(); err != nil {
			return nil, err
		}
	case CertCompressionBrotli:
		lgwin := 10
		for lgwin < 24 && 1<<lgwin-16 < len(body) {
			lgwin++
		}
		w := brotli.NewWriterOptions(&buf, brotli.WriterOptions{Quality: brotli.BestCompression, LGWin: lgwin})
		if _, err := w.Write(body); err != nil {
			return nil, err
		}
		if err := w.Close(); err != nil {
			return nil, err
		}
	case CertCompressionZstd:
		window := zstd.MinWindowSize
		for window < len(body) && window < zstd.MaxWindowSize {
			window <<= 1
		}
		enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedBestCompression),
			zstd.WithEncoderCRC(false), zstd.WithEncoderConcurrency(1), zstd.WithWindowSize(window))
		if err != nil {
			return nil, err
		}
		defer enc.Close()
		return enc.EncodeAll(body, nil), nil
	default:
		return nil, fmt.Errorf("tls13: cannot compress with %v", a)
	}
	return buf.Bytes(), nil
}
