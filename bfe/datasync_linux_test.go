//go:build linux

package bfe

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkPunctureSync is the durability step of a puncture on its own:
// k = 5 slots zeroed at random places in a 13.7 MB key file (n = 2^14,
// p = 2^-10), then fsync(2), as before, or fdatasync(2), as now.
func BenchmarkPunctureSync(b *testing.B) {
	const size = 284759 * SlotSize
	for _, c := range []struct {
		name string
		wrap func(*os.File) slotFile
	}{
		{"fsync", func(f *os.File) slotFile { return f }},
		{"fdatasync", slotFileOf},
	} {
		b.Run(c.name, func(b *testing.B) {
			f, err := os.Create(filepath.Join(b.TempDir(), "key"))
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			if _, err := f.WriteAt(make([]byte, size), 0); err != nil {
				b.Fatal(err)
			}
			if err := f.Sync(); err != nil {
				b.Fatal(err)
			}
			sf := c.wrap(f)
			var zero [SlotSize]byte
			b.ResetTimer()
			for range b.N {
				for range 5 {
					if _, err := sf.WriteAt(zero[:], int64(rand.IntN(size/SlotSize))*SlotSize); err != nil {
						b.Fatal(err)
					}
				}
				if err := sf.Sync(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// The key file's Sync is fdatasync, and it reports errors (a closed file).
func TestDataSyncFile(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "key"))
	if err != nil {
		t.Fatal(err)
	}
	sf := slotFileOf(f)
	if _, ok := sf.(dataSyncFile); !ok {
		t.Fatalf("slotFileOf gave a %T", sf)
	}
	if err := sf.Sync(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := sf.Sync(); err == nil {
		t.Fatal("Sync on a closed file did not fail")
	}
}
