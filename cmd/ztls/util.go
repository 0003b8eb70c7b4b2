package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"

	"github.com/ztls-project/ztls/tls13"
)

type rootsPool = *x509.CertPool

// tlsRoots loads --ca; "" means the system roots (nil).
func tlsRoots(file string) (*x509.CertPool, error) {
	if file == "" {
		return nil, nil
	}
	pool, err := tls13.LoadCertPool(file)
	if err != nil {
		return nil, fmt.Errorf("--ca: %w", err)
	}
	return pool, nil
}

func absPath(p string) (string, error) { return filepath.Abs(p) }

// isTerminal reports whether f is a terminal: a character device other
// than the null device (which is one too, e.g. a command run from cron).
func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	if err != nil || st.Mode()&os.ModeCharDevice == 0 {
		return false
	}
	null, err := os.Stat(os.DevNull)
	return err != nil || !os.SameFile(st, null)
}

// hinted is an error with what to do about it.
type hinted struct {
	err  error
	hint string
}

func (h *hinted) Error() string { return h.err.Error() + "; " + h.hint }
func (h *hinted) Unwrap() error { return h.err }

// withHint adds to err, when it is one that a person can fix and that
// says too little about how (a bind refused, a resolver's certificate not
// trusted), the way forward. Errors from every command pass through it
// before they are printed. The checks look at the error chain and, for
// errors a command formatted with %v, at the words of the standard
// library's messages.
func withHint(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	var ce *tls.CertificateVerificationError
	switch {
	case strings.Contains(msg, "DNS over TLS to") && (errors.As(err, &ce) || strings.Contains(msg, "failed to verify certificate")):
		return &hinted{err, "the DNS-over-TLS resolver's certificate is not trusted: give the CA it chains to with --dns-ca FILE, and the name it carries with --dns-servername NAME when that is not the resolver's address"}
	case errors.Is(err, syscall.EADDRINUSE) || strings.Contains(msg, "address already in use"):
		return &hinted{err, "another process listens on that port: 'ss -ltnp' (TCP) or 'ss -lunp' (UDP) shows which; stop it or choose another port"}
	case errors.Is(err, syscall.EACCES) && isBind(err) || strings.Contains(msg, "bind: permission denied"):
		if listenPort(err) < 1024 { // -1, unknown, included
			return &hinted{err, "ports below 1024 need root or the CAP_NET_BIND_SERVICE capability ('sudo setcap cap_net_bind_service=+ep $(command -v ztls)'); or choose a port of 1024 or above"}
		}
	}
	return err
}

// isBind reports whether err is a listen or bind that failed.
func isBind(err error) bool {
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Op == "listen" {
		return true
	}
	var se *os.SyscallError
	return errors.As(err, &se) && se.Syscall == "bind"
}

var portInMessage = regexp.MustCompile(`:(\d+): bind: `)

// listenPort is the port a failed listen asked for, -1 when err does not
// say.
func listenPort(err error) int {
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Addr != nil {
		if _, p, e := net.SplitHostPort(oe.Addr.String()); e == nil {
			if n, e := strconv.Atoi(p); e == nil {
				return n
			}
		}
	}
	if m := portInMessage.FindStringSubmatch(err.Error()); m != nil {
		if n, e := strconv.Atoi(m[1]); e == nil {
			return n
		}
	}
	return -1
}

// lineEnd passes a response through to a terminal and remembers whether
// its last byte ended a line, so that what is printed after it (the
// connection report, an error) starts on a line of its own: a response
// without a final newline ran into the report ("hello{").
type lineEnd struct {
	w    io.Writer
	open bool // the last byte written was not a newline
}

func (l *lineEnd) Write(p []byte) (int, error) {
	n, err := l.w.Write(p)
	if n > 0 {
		l.open = p[n-1] != '\n'
	}
	return n, err
}

// end ends an open line; on a nil lineEnd it does nothing.
func (l *lineEnd) end() {
	if l != nil && l.open {
		l.w.Write([]byte{'\n'})
		l.open = false
	}
}

// endLines returns a lineEnd over w when w is a terminal, and nil
// elsewhere: in a file or a pipe the response stays byte for byte as it
// came, and the report does not share the stream with it on a screen.
func endLines(w io.Writer) *lineEnd {
	if f, ok := w.(*os.File); ok && isTerminal(f) {
		return &lineEnd{w: w}
	}
	return nil
}
