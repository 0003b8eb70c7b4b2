package layering

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestExamplesBuildOutsideModule copies each Example of the module into
// a main package of a module of its own, outside the repository, that
// requires this one (a replace directive points at the checkout), and
// builds them all: a user who copies an example gets a program that
// builds, with no internal package and no test helper out of reach.
//
// An example is its body, the imports it uses, and the other top-level
// declarations (helpers, types) of the package's example files, which
// godoc shows with a whole-file example. The build is offline: the
// module cache must hold the module's requirements already.
func TestExamplesBuildOutsideModule(t *testing.T) {
	if testing.Short() {
		t.Skip("builds every example in a module of its own (-short)")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command:", err)
	}
	root := moduleRoot(t)
	examples := findExamples(t, root)
	if len(examples) == 0 {
		t.Fatal("no Example functions found in the module")
	}
	names := packageNames(t, goTool, root, examples)

	out := t.TempDir()
	writeFile(t, filepath.Join(out, "go.mod"), fmt.Sprintf(
		"module example.com/ztlsexamples\n\ngo 1.26\n\nrequire %s v0.0.0-00010101000000-000000000000\n\nreplace %s => %s\n",
		module, module, root))
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(out, "go.sum"), sum)

	dirOf := map[string]*example{}
	for _, ex := range examples {
		src, imports := ex.program(t, names)
		for _, imp := range imports {
			if p, ok := strings.CutPrefix(imp, module+"/"); ok && isInternal(p) {
				t.Errorf("%s (%s) imports %s: a user cannot import an internal package", ex.name, ex.file, imp)
			}
		}
		dir := strings.ReplaceAll(ex.pkgDir, "/", "_") + "_" + ex.name
		dirOf[dir] = ex
		writeFile(t, filepath.Join(out, dir, "main.go"), src)
	}

	cmd := exec.Command(goTool, "build", "-o", os.DevNull, "./...")
	cmd.Dir = out
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOSUMDB=off", "GOWORK=off")
	outb, err := cmd.CombinedOutput()
	if err != nil {
		// Name each failing example by its source file.
		msg := string(outb)
		for dir, ex := range dirOf {
			msg = strings.ReplaceAll(msg, dir+"/main.go", ex.name+" of "+ex.file+", as a program")
		}
		t.Fatalf("the examples, copied into a module outside the repository (%s), do not build: %v\n%s", out, err, msg)
	}
	t.Logf("%d examples built as programs outside the module", len(examples))
}

// example is one Example function with what a program made of it needs.
type example struct {
	name    string // ExampleConnect_fallback
	file    string // dial/example_test.go
	pkgDir  string // dial
	body    *ast.BlockStmt
	fset    *token.FileSet
	helpers []ast.Decl        // the package's example files' other declarations
	imports []string          // every import of the package's example files
	aliases map[string]string // an import's name where its file gives one
}

// moduleRoot is the repository's root: the directory of go.mod above
// this test's.
func moduleRoot(t *testing.T) string {
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above", dir)
		}
		dir = parent
	}
}

// findExamples parses every _test.go file of the module that declares an
// Example function.
func findExamples(t *testing.T, root string) []*example {
	byDir := map[string][]*ast.File{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			if fn, ok := decl.(*ast.FuncDecl); ok && fn.Recv == nil && strings.HasPrefix(fn.Name.Name, "Example") {
				byDir[filepath.Dir(path)] = append(byDir[filepath.Dir(path)], f)
				break
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var all []*example
	for dir, files := range byDir {
		rel, err := filepath.Rel(root, dir)
		if err != nil {
			t.Fatal(err)
		}
		rel = filepath.ToSlash(rel)
		var helpers []ast.Decl
		var imports []string
		aliases := map[string]string{}
		var found []*example
		for _, f := range files {
			for _, imp := range f.Imports {
				p, _ := strconv.Unquote(imp.Path.Value)
				if !slices.Contains(imports, p) {
					imports = append(imports, p)
				}
				if imp.Name != nil {
					aliases[p] = imp.Name.Name
				}
			}
			for _, decl := range f.Decls {
				switch d := decl.(type) {
				case *ast.GenDecl:
					if d.Tok != token.IMPORT {
						helpers = append(helpers, d)
					}
				case *ast.FuncDecl:
					name := d.Name.Name
					switch {
					case d.Recv == nil && strings.HasPrefix(name, "Example"):
						found = append(found, &example{name: name, file: filepath.ToSlash(filepath.Join(rel, filepath.Base(fset.Position(f.Pos()).Filename))),
							pkgDir: rel, body: d.Body, fset: fset})
					case d.Recv == nil && (strings.HasPrefix(name, "Test") || strings.HasPrefix(name, "Benchmark") || strings.HasPrefix(name, "Fuzz")):
					default:
						helpers = append(helpers, d)
					}
				}
			}
		}
		for _, ex := range found {
			ex.helpers, ex.imports, ex.aliases = helpers, imports, aliases
		}
		all = append(all, found...)
	}
	slices.SortFunc(all, func(a, b *example) int { return strings.Compare(a.file+a.name, b.file+b.name) })
	return all
}

// packageNames maps each import path the examples use to its package's
// name (github.com/redis/go-redis/v9 is redis), from go list.
func packageNames(t *testing.T, goTool, root string, examples []*example) map[string]string {
	var paths []string
	for _, ex := range examples {
		for _, p := range ex.imports {
			if !slices.Contains(paths, p) {
				paths = append(paths, p)
			}
		}
	}
	cmd := exec.Command(goTool, append([]string{"list", "-f", "{{.ImportPath}} {{.Name}}"}, paths...)...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOPROXY=off")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %v: %v", paths, err)
	}
	names := map[string]string{}
	for line := range strings.Lines(string(out)) {
		if p, name, ok := strings.Cut(strings.TrimSpace(line), " "); ok {
			names[p] = name
		}
	}
	return names
}

// program is the example as a main package: its body as main, the
// helpers, and the imports that code uses, which it also returns.
func (ex *example) program(t *testing.T, names map[string]string) (src []byte, imports []string) {
	var code bytes.Buffer
	code.WriteString("func main() ")
	if err := format.Node(&code, ex.fset, ex.body); err != nil {
		t.Fatal(err)
	}
	code.WriteString("\n")
	for _, d := range ex.helpers {
		code.WriteString("\n")
		if err := format.Node(&code, ex.fset, d); err != nil {
			t.Fatal(err)
		}
		code.WriteString("\n")
	}
	used := map[string]bool{}
	f, err := parser.ParseFile(token.NewFileSet(), "", "package main\n"+code.String(), parser.SkipObjectResolution)
	if err != nil {
		t.Fatalf("%s: %v", ex.name, err)
	}
	ast.Inspect(f, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok {
			if id, ok := sel.X.(*ast.Ident); ok {
				used[id.Name] = true
			}
		}
		return true
	})
	var b bytes.Buffer
	fmt.Fprintf(&b, "// %s, copied from %s.\npackage main\n\nimport (\n", ex.name, ex.file)
	for _, p := range ex.imports {
		name, ok := ex.aliases[p]
		if !ok {
			name = names[p]
		}
		if name == "_" || used[name] {
			fmt.Fprintf(&b, "\t%s %q\n", name, p)
			imports = append(imports, p)
		}
	}
	b.WriteString(")\n\n")
	b.Write(code.Bytes())
	return b.Bytes(), imports
}

// isInternal reports whether the module-relative package path p is
// internal to the module (Go's rule: a path element "internal").
func isInternal(p string) bool {
	return slices.Contains(strings.Split(p, "/"), "internal")
}

func writeFile(t *testing.T, path string, data any) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	var b []byte
	switch d := data.(type) {
	case string:
		b = []byte(d)
	case []byte:
		b = d
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
