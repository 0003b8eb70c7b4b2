package main

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// onTerminal runs the binary with stdout and stderr on one pseudo-terminal
// and returns what the terminal shows, line ends as "\n".
func onTerminal(t *testing.T, args ...string) string {
	t.Helper()
	master, slave := openPTY(t)
	cmd := exec.Command(ztlsBinary(t), args...)
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir()) // what a client remembers stays in the test
	cmd.Stdout, cmd.Stderr = slave, slave
	var screen bytes.Buffer
	read := make(chan struct{})
	go func() { io.Copy(&screen, master); close(read) }()
	err := cmd.Run()
	slave.Close() // the master reads to the end once no one holds the slave
	<-read
	if err != nil {
		t.Fatalf("ztls %s: %v\n%s", strings.Join(args, " "), err, screen.String())
	}
	return strings.ReplaceAll(screen.String(), "\r\n", "\n")
}

// A response without a final newline ends its line on a terminal before
// the report (issue 27: "hello" ran into it), and is left as it came in
// a pipe.
func TestUX27ResponseLineEndsBeforeReport(t *testing.T) {
	p := newUXPKI(t)
	port := boundPort(t, start(t, "serving TLS 1.3", "serve", "--listen", "127.0.0.1:0", "--cert", p.cert, "--key", p.key, "--respond", "hello"))
	args := append([]string{"connect", "127.0.0.1:" + port, "--data", "x"}, p.client()...)

	for _, json := range []bool{false, true} {
		master, slave := openPTY(t)
		a := args
		if json {
			a = append(a, "--json")
		}
		cmd := exec.Command(ztlsBinary(t), a...)
		cmd.Stdout, cmd.Stderr = slave, slave
		var screen bytes.Buffer
		read := make(chan struct{})
		go func() { io.Copy(&screen, master); close(read) }()
		if err := cmd.Run(); err != nil {
			t.Fatalf("json %v: %v", json, err)
		}
		slave.Close() // the master reads to the end once no one holds the slave
		<-read
		got := strings.ReplaceAll(screen.String(), "\r\n", "\n")
		want := "hello\nconnected to"
		if json {
			want = "hello\n{"
		}
		if !strings.Contains(got, want) {
			t.Errorf("json %v: the terminal shows %q, want %q in it", json, got, want)
		}
	}

	// In a pipe the response is as the server sent it.
	out, err := exec.Command(ztlsBinary(t), args...).Output()
	if err != nil || string(out) != "hello" {
		t.Errorf("stdout in a pipe %q (%v), want %q", out, err, "hello")
	}
}

// get --http2's body ends its line on a terminal before the report too.
func TestUX27GetHTTP2BodyLineEndsBeforeReport(t *testing.T) {
	p := newUXPKI(t)
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello") }))
	defer backend.Close()
	port := boundPort(t, start(t, "serving TLS 1.3", "serve", "--listen", "127.0.0.1:0", "--cert", p.cert, "--key", p.key,
		"--backend", backend.URL, "--alpn", "h2,http/1.1"))
	args := append([]string{"get", "https://127.0.0.1:" + port + "/", "--http2"}, p.client()...)
	if got := onTerminal(t, args...); !strings.Contains(got, "hello\nconnected to") {
		t.Errorf("the terminal shows %q, want the body's line ended before the report", got)
	}
	cmd := exec.Command(ztlsBinary(t), args...)
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	out, err := cmd.Output()
	if err != nil || !strings.HasSuffix(string(out), "\r\n\r\nhello") {
		t.Errorf("stdout in a pipe %q (%v), want it to end with the body as sent", out, err)
	}
}
