package main

import (
	"bytes"
	"io"
	"os/exec"
	"strings"
	"testing"
)

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
