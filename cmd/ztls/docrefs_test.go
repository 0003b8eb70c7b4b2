package main

import (
	"go/scanner"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestDocReferences fails when a Markdown file or a Go comment names a file
// of this repository that does not exist: a reader sent to a document
// should find it there. Checked are paths ending in .md, and paths
// with a slash ending in .go or .json, relative to the repository root or
// to the directory of the file that names them. Not checked: URLs,
// absolute and home paths ("/etc/x.json", "~/.cache/x.json"), and paths
// whose first element is a placeholder in capitals ("DIR/service.json",
// "$XDG_CACHE_HOME/x.json").
func TestDocReferences(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("repository root not found: %v", err)
	}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || name == "bin" || name == "fuzz" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		var texts []docText
		switch filepath.Ext(name) {
		case ".md":
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			texts = []docText{{line: 1, text: string(b)}}
		case ".go":
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			texts = goComments(b)
		default:
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		for _, tx := range texts {
			for _, ref := range docRefs(tx.text) {
				if !refExists(root, filepath.Dir(path), ref.path) {
					t.Errorf("%s:%d names %s, which is not in the repository", rel, tx.line+ref.line, ref.path)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// docText is a piece of documentation and the line it starts on.
type docText struct {
	line int
	text string
}

// goComments returns a Go file's comments. The scanner goes on past
// syntax errors, so a file in the middle of an edit still has its
// comments checked.
func goComments(src []byte) []docText {
	fset := token.NewFileSet()
	file := fset.AddFile("", fset.Base(), len(src))
	var s scanner.Scanner
	s.Init(file, src, func(token.Position, string) {}, scanner.ScanComments)
	var out []docText
	for {
		pos, tok, lit := s.Scan()
		if tok == token.EOF {
			return out
		}
		if tok == token.COMMENT {
			out = append(out, docText{line: fset.Position(pos).Line, text: lit})
		}
	}
}

var (
	// refPattern is a relative path ending in one of the checked
	// extensions, not preceded by a path character (so a suffix of a
	// longer token is not taken for a path of its own).
	refPattern = regexp.MustCompile(`(^|[^A-Za-z0-9_.\-/~$])([A-Za-z0-9_.\-][A-Za-z0-9_.\-/]*\.(?:md|go|json))\b`)
	urlPattern = regexp.MustCompile(`[A-Za-z][A-Za-z0-9+.\-]*://[^\s)>\]"'` + "`" + `]*`)
)

type docRef struct {
	line int // 0-based line within the text
	path string
}

// docRefs returns the repository paths text names.
func docRefs(text string) []docRef {
	text = urlPattern.ReplaceAllStringFunc(text, func(u string) string { return strings.Repeat(" ", len(u)) })
	var refs []docRef
	for i, line := range strings.Split(text, "\n") {
		for _, m := range refPattern.FindAllStringSubmatch(line, -1) {
			p := m[2]
			if !strings.HasSuffix(p, ".md") && !strings.Contains(p, "/") {
				continue // a bare file name: too often another project's
			}
			if first, _, ok := strings.Cut(p, "/"); ok && first == strings.ToUpper(first) && strings.ToLower(first) != first {
				continue // DIR/service.json: a placeholder
			}
			if strings.Contains(p, "...") {
				continue
			}
			refs = append(refs, docRef{line: i, path: p})
		}
	}
	return refs
}

// refExists reports whether p names a file or directory inside the
// repository, relative to its root or to dir.
func refExists(root, dir, p string) bool {
	for _, base := range []string{root, dir} {
		full := filepath.Join(base, filepath.FromSlash(p))
		if rel, err := filepath.Rel(root, full); err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			continue // outside the repository: another checkout will not have it
		}
		if _, err := os.Stat(full); err == nil {
			return true
		}
	}
	return false
}
