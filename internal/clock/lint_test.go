package clock

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// realTimeNotes are the notes that let a line read the system clock with
// time.Now: a deadline handed to the runtime (which Now would shift), or
// an elapsed time that never meets a validity or a stored instant.
var realTimeNotes = []string{"// real time:", "/* real time:", "Deadline("}

// TestNoWallClockReads is how the project checks that nothing decides by
// the minute it runs in: every time.Now in the module's Go code (product
// and tests, the testbed excepted) is either a deadline handed to the
// runtime (on a line with a SetDeadline-style call) or carries a
// "// real time: WHY" note saying it measures elapsed time or talks to a
// peer on the system clock. Anything else reads the ztls clock (Now, or a
// component's injected Config.Time / Options.Now), so `make test
// CLOCK_AT=MM:SS` moves every test and process to that instant.
func TestNoWallClockReads(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	skip := map[string]bool{
		// The testbed measures real latencies and never decides by validity.
		"testbed": true, "cmd/ztls-bench": true, "bench": true,
		"internal/clock": true, // the clock itself
	}
	fset := token.NewFileSet()
	var bad []string
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if skip[rel] || strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		f, err := parser.ParseFile(fset, path, src, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		lines := strings.Split(string(src), "\n")
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || sel.Sel.Name != "Now" {
				return true
			}
			if pkg, ok := sel.X.(*ast.Ident); !ok || pkg.Name != "time" {
				return true
			}
			pos := fset.Position(call.Pos())
			line := lines[pos.Line-1]
			for _, note := range realTimeNotes {
				if strings.Contains(line, note) {
					return true
				}
			}
			bad = append(bad, rel+":"+itoa(pos.Line)+": "+strings.TrimSpace(line))
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(bad) > 0 {
		t.Fatalf("time.Now read where the ztls clock (clock.Now, Config.Time, Options.Now) belongs, or without a \"// real time: WHY\" note:\n%s",
			strings.Join(bad, "\n"))
	}
}

func itoa(n int) string {
	var b []byte
	for ; n > 0 || len(b) == 0; n /= 10 {
		b = append([]byte{byte('0' + n%10)}, b...)
	}
	return string(b)
}
