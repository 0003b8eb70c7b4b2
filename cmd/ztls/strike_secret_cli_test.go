package main

import (
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ztls-project/ztls/internal/clock"
	"github.com/ztls-project/ztls/internal/testsupport/testproc"
)

// The fleet Redis's password (--strike-register): never shown in what
// ztls serve prints, and given without the command line, which ps shows
// to every user: in a file only its owner reads (--strike-register-file)
// or in $REDIS_PASSWORD.

// strikePassword is the password of the tests' Redis; no output may
// hold any of it (passwordMark is in each part of it the slash splits).
// The slash also makes it a password url.Parse misreads unescaped.
const (
	strikePassword = "pw-Kq9f3-never/shown-Kq9f3"
	passwordMark   = "Kq9f3"
)

// A malformed or refused register URL is reported with its password
// masked, and so is an unreachable Redis.
func TestCLIStrikeRegisterErrorsHidePassword(t *testing.T) {
	s := newSite(t)
	pw := url.PathEscape(strikePassword) // as an operator must write it
	serve := []string{"serve", "--listen", "127.0.0.1:0", "--zdata", s.zd, "--respond", "hello", "--strike-register"}
	for _, tc := range []struct {
		url, want string
	}{
		{"redis://:" + pw + "@", "want redis://[USER[:PASSWORD]@]HOST:PORT"},
		{"http://:" + pw + "@127.0.0.1:6379", `in "http://:xxxxx@127.0.0.1:6379"`},
		{"redis://:" + pw + "@[::1", `in "redis://:xxxxx@[::1"`},
		// Unescaped, the slash would make a URL parser read
		// ":pw-Kq9f3-never" as the host: refused, not dialled.
		{"redis://:" + strikePassword + "@127.0.0.1:6379", `in "redis://:xxxxx@127.0.0.1:6379"`},
		{pw + "@127.0.0.1:6379", `in "xxxxx@127.0.0.1:6379"`},
		{"redis://admin:" + pw + "@127.0.0.1:6379/db", `in "redis://admin:xxxxx@127.0.0.1:6379/db"`},
		{"redis-sentinel://admin:" + pw + "@127.0.0.1:26379", `no MASTER name in "redis-sentinel://admin:xxxxx@127.0.0.1:26379"`},
		{"redis://:" + pw + "@127.0.0.1", `in "redis://:xxxxx@127.0.0.1"`},
	} {
		out := serveRefused(t, append(serve, tc.url)...)
		if !strings.Contains(out, tc.want) {
			t.Errorf("--strike-register %s: want %q in:\n%s", tc.url, tc.want, out)
		}
		noPassword(t, out)
	}

	// Unreachable: the server starts (Redis may come later) and refuses
	// early data, naming the address alone.
	srv := startServe(t, nil, "ZTLS on", "serve", "--listen", "127.0.0.1:"+strconv.Itoa(s.port), "--zdata", s.zd,
		"--respond", "hello", "-v", "--strike-register", "redis://:"+pw+"@127.0.0.1:"+strconv.Itoa(freePort(t)))
	deliver(t, "127.0.0.1:"+strconv.Itoa(s.port), ztlsFlight(t, s, []byte("GET /transfer?amount=100")))
	srv.waitFor(t, "strike register unavailable")
	srv.waitFor(t, "connection refused")
	stopCmd(srv.cmd)
	noPassword(t, srv.String())
	if !strings.Contains(srv.String(), "redis://:xxxxx@127.0.0.1:") {
		t.Errorf("the start does not say which register (password masked):\n%s", srv)
	}
}

// The password reaches a Redis with requirepass from a file or from the
// environment; a wrong or missing one is a clear error that shows no
// password; a file others may read is refused.
func TestCLIStrikeRegisterPasswordOutOfBand(t *testing.T) {
	redis, _ := startRedis(t, "--requirepass", strikePassword)
	s := newSite(t)
	pw := url.PathEscape(strikePassword)
	addr := "127.0.0.1:" + strconv.Itoa(s.port)
	// A window longer than the test: every first flight predates the
	// register's memory, so it is refused once Redis has answered.
	serve := []string{"serve", "--listen", addr, "--zdata", s.zd, "--respond", "hello", "-v", "--early-window", "1h"}
	const wrong = "wrong-" + passwordMark

	file := filepath.Join(s.dir, "strike-url")
	writeFile(t, file, "redis://:"+pw+"@"+redis+"\n")
	if err := os.Chmod(file, 0o600); err != nil {
		t.Fatal(err)
	}
	pwFile := filepath.Join(s.dir, "strike-password")
	writeFile(t, pwFile, strikePassword+"\n")
	if err := os.Chmod(pwFile, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		env  []string
		args []string
		want string // in the line of the refused first flight
		auth string // in the start's log line
	}{
		{"file", nil, []string{"--strike-register-file", file},
			"the strike register started after this ClientHello", "auth=\"password from the URL\""},
		{"environment", []string{envRedisPassword + "=" + strikePassword}, []string{"--strike-register", "redis://" + redis},
			"the strike register started after this ClientHello", "auth=\"password from $REDIS_PASSWORD\""},
		{"password file", []string{envRedisPassword + "=" + wrong}, []string{"--strike-register", "redis://" + redis, "--strike-register-password-file", pwFile},
			"the strike register started after this ClientHello", "auth=\"password from " + pwFile + "\""},
		// The URL's password comes first.
		{"URL before environment", []string{envRedisPassword + "=" + wrong}, []string{"--strike-register-file", file},
			"the strike register started after this ClientHello", "auth=\"password from the URL\""},
		{"wrong password", []string{envRedisPassword + "=" + wrong}, []string{"--strike-register", "redis://" + redis},
			"redisreg: AUTH refused: WRONGPASS", "auth=\"password from $REDIS_PASSWORD\""},
		{"no password", nil, []string{"--strike-register", "redis://" + redis},
			"NOAUTH Authentication required", "auth=none"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := startServe(t, tc.env, "ZTLS on", append(serve, tc.args...)...)
			// A fresh register refuses a first flight as too young once
			// it has checked it in Redis: the answer shows whether the
			// server logged in.
			deliver(t, addr, ztlsFlight(t, s, []byte("GET /transfer?amount=100")))
			srv.waitFor(t, tc.want)
			stopCmd(srv.cmd)
			if !strings.Contains(srv.String(), tc.auth) {
				t.Errorf("no %s in:\n%s", tc.auth, srv)
			}
			noPassword(t, srv.String())
		})
	}

	// A file others may read is refused, as --tsig-secret-file is.
	if err := os.Chmod(file, 0o640); err != nil {
		t.Fatal(err)
	}
	out := serveRefused(t, append(serve, "--strike-register-file", file)...)
	if !strings.Contains(out, "--strike-register-file: "+file+" is readable by group or others (mode 0640): chmod 600") {
		t.Errorf("group-readable file:\n%s", out)
	}
	noPassword(t, out)
	out = serveRefused(t, append(serve, "--strike-register-file", file, "--strike-register", "redis://"+redis)...)
	if !strings.Contains(out, "give --strike-register or --strike-register-file, not both") {
		t.Errorf("both flags:\n%s", out)
	}
}

// noPassword fails when out holds any part of a password.
func noPassword(t *testing.T, out string) {
	t.Helper()
	if strings.Contains(out, passwordMark) {
		t.Errorf("the output shows (part of) a password:\n%s", out)
	}
}

// served is a ztls process whose whole output, from its first line, is
// kept (startProc keeps only what follows the ready line).
type served struct {
	cmd *exec.Cmd
	testproc.Buffer
}

func (s *served) waitFor(t *testing.T, want string) {
	t.Helper()
	for deadline := clock.Now().Add(10 * time.Second); clock.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if strings.Contains(s.String(), want) {
			return
		}
	}
	t.Fatalf("no %q in:\n%s", want, s.String())
}

// startServe runs ztls with env added to the test's environment (less
// any REDIS_PASSWORD of its own) and waits for ready in its output.
func startServe(t *testing.T, env []string, ready string, args ...string) *served {
	t.Helper()
	s := &served{cmd: exec.Command(ztlsBinary(t), args...)}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, envRedisPassword+"=") {
			s.cmd.Env = append(s.cmd.Env, kv)
		}
	}
	s.cmd.Env = append(s.cmd.Env, env...)
	s.cmd.Stdout, s.cmd.Stderr = &s.Buffer, &s.Buffer
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.cmd.Process.Kill()
		s.cmd.Wait()
	})
	s.waitFor(t, ready)
	return s
}
