package record

import (
	"testing"
)

const benchSize = 16 << 10

func BenchmarkSeal(b *testing.B) {
	for _, s := range allSuites() {
		b.Run(s.Name, func(b *testing.B) {
			out, _ := pair(b, s)
			msg := make([]byte, benchSize)
			buf := make([]byte, 0, benchSize+256)
			b.SetBytes(benchSize)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := out.Seal(buf[:0], TypeApplicationData, msg, 0); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkOpen(b *testing.B) {
	for _, s := range allSuites() {
		b.Run(s.Name, func(b *testing.B) {
			out, in := pair(b, s)
			msg := make([]byte, benchSize)
			// Open decrypts in place, so each iteration restores the record
			// from a pristine copy sealed at the right sequence number.
			const n = 64
			recs := make([][]byte, n)
			for i := range recs {
				r, err := out.Seal(nil, TypeApplicationData, msg, 0)
				if err != nil {
					b.Fatal(err)
				}
				recs[i] = r[HeaderLen:]
			}
			work := make([]byte, len(recs[0]))
			b.SetBytes(benchSize)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if i == n {
					b.StopTimer()
					in.seq, i = 0, 0
					b.StartTimer()
				}
				copy(work, recs[i])
				if _, _, err := in.Open(work, MaxPlaintext); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}

func BenchmarkDeframer(b *testing.B) {
	rec := AppendPlain(nil, TypeApplicationData, 0x0303, make([]byte, benchSize))
	var d Deframer
	b.SetBytes(int64(len(rec)))
	b.ReportAllocs()
	for b.Loop() {
		d.Write(rec[:1000])
		d.Write(rec[1000:])
		if _, _, ok, err := d.Next(); !ok || err != nil {
			b.Fatal("no record")
		}
	}
}

// BenchmarkNewHalfConn is the record layer's share of a handshake: each side
// installs four traffic secrets (handshake and application, both ways).
func BenchmarkNewHalfConn(b *testing.B) {
	for _, s := range allSuites() {
		b.Run(s.Name, func(b *testing.B) {
			secret := make([]byte, s.Hash.Size())
			b.ReportAllocs()
			for b.Loop() {
				if _, err := NewHalfConn(s, secret); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
