package layering

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The connection's path is read by people following one connection
// through it: no function there longer than a screen or two, none with a
// parameter list that needs a struct (docs/architecture.md).
const (
	maxFuncLines  = 80
	maxFuncParams = 6
)

var readPath = []string{"dial", "prevalidate", "turbo", "tls13", "dns/resolver"}

func TestFunctionSize(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, dir := range readPath {
		entries, err := os.ReadDir(filepath.Join(root, dir))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			name := e.Name()
			if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
				continue
			}
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, filepath.Join(root, dir, name), nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range f.Decls {
				fd, ok := d.(*ast.FuncDecl)
				if !ok || fd.Body == nil {
					continue
				}
				checked++
				pos := fset.Position(fd.Pos())
				where := dir + "/" + name + ": " + fd.Name.Name
				if n := fset.Position(fd.End()).Line - pos.Line + 1; n >= maxFuncLines {
					t.Errorf("%s is %d lines (at most %d): split it into named steps", where, n, maxFuncLines-1)
				}
				if n := fd.Type.Params.NumFields(); n > maxFuncParams {
					t.Errorf("%s takes %d parameters (at most %d): give them a struct", where, n, maxFuncParams)
				}
			}
		}
	}
	if checked < 200 {
		t.Fatalf("checked only %d functions; the walk is broken", checked)
	}
}
