package field25519

import (
	"math/bits"
	mathrand "math/rand/v2"
	"os"
	"testing"

	dudectstat "github.com/ztls-project/ztls/internal/testsupport/dudect"
)

// TestScalarMultDudect is a dudect-style check (Reparaz, Balasch and
// Verbauwhede, "Dude, is my code constant time?", DATE 2017) of ScalarMult,
// the one function that holds secrets: it times ScalarMult on two classes
// of inputs, randomly interleaved — class 0 a fixed scalar (all zeros
// before clamping, so the ladder swaps least), class 1 fresh random
// scalars; both with one fixed u — and fails if Welch's t statistic
// between the classes passes 10, dudect's threshold for a leak, on the
// raw samples or on those below any of a few percentiles. A control with a
// deliberate leak of about 1 % must pass 10, to show the harness can see
// one. It measures time, so it runs only when ZTLS_DUDECT=1 (about 6 s on
// a quiet core);
// the default run relies on TestGeneratedCodeIsStraightLine. With
// ZTLS_DUDECT=generic it times the Go routines instead of the assembly.
func TestScalarMultDudect(t *testing.T) {
	run := dudectRunner(t)
	var u [32]byte
	u[0] = 9
	var worst float64
	run(func() {
		worst = dudect(t, "ScalarMult", func(k *[32]byte) {
			var out [32]byte
			ScalarMult(&out, k, &u)
		})
	})
	if worst > 10 {
		t.Fatalf("|t| = %.1f > 10: ScalarMult's time depends on the scalar", worst)
	}
	// The control: the same harness must see a leak of about 1 % (work
	// proportional to the scalar's set bits), or it proves nothing here.
	var sink int
	control := dudect(t, "control", func(k *[32]byte) {
		var out [32]byte
		for _, b := range k {
			for range bits.OnesCount8(b) * 8 {
				sink++
			}
		}
		ScalarMult(&out, k, &u)
	})
	if control <= 10 {
		t.Fatalf("the harness did not detect the control's leak (|t| = %.1f): the machine is too noisy for this test", control)
	}
}

// dudect times f on the two classes of scalars and returns the largest
// |t| over the cropped sample sets.
func dudect(t *testing.T, name string, f func(k *[32]byte)) float64 {
	const n = 100000
	rnd := mathrand.New(mathrand.NewPCG(1, 2))
	var samples dudectstat.Samples
	for range n {
		class := rnd.IntN(2)
		var k [32]byte
		if class == 1 {
			for i := range k {
				k[i] = byte(rnd.Uint32())
			}
		}
		samples.Time(class, func() { f(&k) })
	}
	return dudectstat.Worst(t, name, &samples)
}

// dudectRunner skips t unless ZTLS_DUDECT is set (a timing test wants a
// quiet machine) and returns how to run the timed code: as it is with
// ZTLS_DUDECT=1, on the Go routines with ZTLS_DUDECT=generic.
func dudectRunner(t *testing.T) func(f func()) {
	t.Helper()
	switch os.Getenv("ZTLS_DUDECT") {
	case "":
		t.Skip("timing test: set ZTLS_DUDECT=1 (or =generic for the Go routines) on a quiet machine to run it")
	case "generic":
		return func(f func()) { useGenericStep(t, f) }
	}
	return func(f func()) { f() }
}
