package layering

import (
	"go/parser"
	"go/token"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/ztls-project/ztls"

// The product's packages, lowest layer first, each with the module's
// packages its non-test files may import ("x/..." is x and every package
// under it). docs/architecture.md draws the same picture.
var product = map[string][]string{
	// Foundations: no imports from the module but their own internals.
	"internal/clock":     nil,
	"internal/connlimit": nil,
	"internal/dialhook":  nil,
	"internal/turbohook": nil,
	"bfe":                nil,
	"revocation":         nil,
	"dns/dnsname":        nil,
	"dns/dnsstream":      nil,
	"tls13/internal/...": {"tls13/internal/..."},
	"turbo/internal/...": {"turbo/internal/..."},
	"internal/layering":  nil,
	"dns/publish":        {"dns/dnsname", "internal/clock"},
	"dns/resolver":       {"dns/dnsname", "dns/dnsstream", "internal/clock"},
	"dns/authority":      {"dns/dnsname", "dns/dnsstream", "internal/clock"},
	"tls13":              {"internal/clock", "revocation", "tls13/internal/..."},
	"turbo":              {"dns/dnsname", "internal/clock", "internal/turbohook", "tls13", "turbo/internal/..."},
	"zdata":              {"bfe", "dns/dnsname", "internal/clock", "revocation", "tls13"},
	"zdata/redisreg":     {"bfe", "internal/clock", "tls13", "zdata"},
	"server":             {"internal/clock", "internal/connlimit", "tls13", "turbo"},
	"prevalidate":        {"dns/resolver", "internal/clock", "revocation", "tls13", "turbo", "zdata"},
	"dial":               {"dns/resolver", "internal/clock", "internal/dialhook", "prevalidate", "revocation", "tls13", "turbo", "zdata"},
	"ztlshttp":           {"dial", "dns/resolver", "internal/clock", "prevalidate", "tls13"},
	"internal/metrics":   {"dns/authority", "internal/clock", "server", "tls13", "zdata/redisreg"},
	"cmd/ztls":           {"bfe", "dial", "dns/...", "internal/clock", "internal/metrics", "prevalidate", "revocation", "server", "tls13", "turbo", "zdata/...", "ztlshttp"},

	// The P-256 signer of CertificateVerify (tls13/internal/sig): standard library only.
	"tls13/internal/p256sign": nil,

	// The P-256 verifier of CertificateVerify (tls13/internal/sig): standard library and cryptobyte only.
	"tls13/internal/p256verify": nil,
}

// Test scaffolding and the testbed: they may import the product and each
// other, and nothing of the product may import them.
var scaffolding = []string{
	"internal/testsupport/...",
	"turbo/turbotest",
	"testbed/...",
	"cmd/ztls-bench",
}

// match reports whether pkg is pattern or, for "x/...", x or under it.
func match(pattern, pkg string) bool {
	if base, ok := strings.CutSuffix(pattern, "/..."); ok {
		return pkg == base || strings.HasPrefix(pkg, base+"/")
	}
	return pattern == pkg
}

func matchAny(patterns []string, pkg string) bool {
	for _, p := range patterns {
		if match(p, pkg) {
			return true
		}
	}
	return false
}

// rule returns what pkg may import and whether pkg has a place at all.
func rule(pkg string) (allowed []string, scaffold, known bool) {
	if matchAny(scaffolding, pkg) {
		return nil, true, true
	}
	// The most specific pattern wins ("tls13/internal/..." before "tls13").
	best := ""
	for p := range product {
		if match(p, pkg) && len(p) > len(best) {
			best = p
		}
	}
	if best == "" {
		return nil, false, false
	}
	return product[best], false, true
}

// moduleImports maps each package directory of the module (relative to
// root) to the module packages its non-test Go files import.
func moduleImports(t *testing.T, root string) map[string]map[string]bool {
	t.Helper()
	pkgs := map[string]map[string]bool{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if p != root && (name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, filepath.Dir(p))
		dir := filepath.ToSlash(rel)
		if pkgs[dir] == nil {
			pkgs[dir] = map[string]bool{}
		}
		for _, imp := range f.Imports {
			ip, _ := strconv.Unquote(imp.Path.Value)
			if rest, ok := strings.CutPrefix(ip, module+"/"); ok {
				pkgs[dir][rest] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return pkgs
}

func TestImportLayers(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root not found at %s: %v", root, err)
	}
	pkgs := moduleImports(t, root)
	if len(pkgs) < 20 {
		t.Fatalf("found only %d packages under %s; the walk is broken", len(pkgs), root)
	}
	dirs := make([]string, 0, len(pkgs))
	for d := range pkgs {
		dirs = append(dirs, d)
	}
	sort.Strings(dirs)
	for _, pkg := range dirs {
		allowed, scaffold, known := rule(pkg)
		if !known {
			t.Errorf("package %s has no place in the layering table (internal/layering/layering_test.go, docs/architecture.md): add it", pkg)
			continue
		}
		for imp := range pkgs[pkg] {
			_, impScaffold, impKnown := rule(imp)
			switch {
			case !impKnown:
				// Reported when its own directory is walked.
			case scaffold:
				if match("cmd/...", imp) {
					t.Errorf("%s imports the command %s", pkg, imp)
				}
			case impScaffold:
				t.Errorf("product package %s imports test scaffolding or the testbed: %s", pkg, imp)
			case imp == pkg || internalTo(pkg, imp):
			case !matchAny(allowed, imp):
				t.Errorf("%s imports %s, which is not below it (allowed: %s)", pkg, imp, strings.Join(allowed, ", "))
			}
		}
	}
}

// internalTo reports whether imp is one of pkg's own internal packages
// (pkg/internal/...), which every package may use.
func internalTo(pkg, imp string) bool {
	return strings.HasPrefix(imp, path.Join(pkg, "internal")+"/")
}

// TestLayeringRuleCatchesViolations checks the rule itself on imports
// that must be refused.
func TestLayeringRuleCatchesViolations(t *testing.T) {
	for _, c := range []struct{ pkg, imp string }{
		{"tls13", "dial"},
		{"tls13", "dns/resolver"},
		{"tls13", "zdata"},
		{"dns/resolver", "tls13"},
		{"cmd/ztls", "internal/testsupport/testpki"},
		{"dial", "internal/testsupport/lab"},
		{"server", "testbed/bench"},
		{"prevalidate", "dial"},
		{"zdata", "dial"},
	} {
		allowed, _, known := rule(c.pkg)
		_, impScaffold, _ := rule(c.imp)
		if known && !impScaffold && matchAny(allowed, c.imp) {
			t.Errorf("the table lets %s import %s", c.pkg, c.imp)
		}
	}
}
