package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/ztls-project/ztls/testbed/hosts"
)

func init() {
	Register("openssl", func() Contender { return openSSL{} })
}

// openSSL is OpenSSL's s_server and s_client processes: a full TLS 1.3
// handshake with X25519 (DNS + 3 RTT to the first byte).
//
// Starting a process takes milliseconds, which no user of a browser pays
// per connection, so s_client is started before the clock: it connects to a
// Unix socket of ours and its ClientHello waits there. The clock then
// starts, the DNS lookup and the TCP connect run from the client host, and
// the socket is spliced to the TCP connection; the first response byte is
// taken when s_client prints it. The handshake ends when s_client's second
// flight (its Finished) passes the splice.
type openSSL struct{}

func (openSSL) Name() string { return "openssl" }

type process struct {
	cmd    *exec.Cmd
	done   chan struct{}
	stderr *bytes.Buffer
}

func (p *process) Close() error {
	p.cmd.Process.Kill()
	<-p.done
	return nil
}

func startProcess(cmd *exec.Cmd) (*process, error) {
	p := &process{cmd: cmd, done: make(chan struct{}), stderr: new(bytes.Buffer)}
	if cmd.Stderr == nil {
		cmd.Stderr = &limitedWriter{w: p.stderr, n: 4096}
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("bench: starting %s: %w", cmd.Path, err)
	}
	go func() {
		cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

type limitedWriter struct {
	w io.Writer
	n int
}

func (l *limitedWriter) Write(b []byte) (int, error) {
	if l.n > 0 {
		k := min(len(b), l.n)
		l.w.Write(b[:k])
		l.n -= k
	}
	return len(b), nil
}

func (openSSL) StartServer(ctx context.Context, h *hosts.Host, cfg ServerConfig) (io.Closer, error) {
	if _, err := exec.LookPath("openssl"); err != nil {
		return nil, errors.New("bench: openssl is not installed")
	}
	// -HTTP answers "GET /path" with the file's bytes as they are.
	cmd := h.Command(context.Background(), "openssl", "s_server", "-accept", cfg.Addr.String(),
		"-cert", cfg.CertFile, "-key", cfg.KeyFile, "-tls1_3", "-groups", "X25519", "-HTTP", "-quiet")
	cmd.Dir = cfg.Dir
	p, err := startProcess(cmd)
	if err != nil {
		return nil, err
	}
	// Wait until it listens: probe from the server host itself.
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := h.DialContext(ctx, "tcp", cfg.Addr.String())
		if err == nil {
			c.Close()
			return p, nil
		}
		select {
		case <-p.done:
			return nil, fmt.Errorf("bench: s_server exited: %s", bytes.TrimSpace(p.stderr.Bytes()))
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			p.Close()
			return nil, fmt.Errorf("bench: s_server does not listen on %s", cfg.Addr)
		}
	}
}

var sockSeq atomic.Int64

func (openSSL) RunClient(ctx context.Context, c *Client) (Sample, error) {
	var s Sample
	sock := filepath.Join(c.Dir, fmt.Sprintf("s_client-%d.sock", sockSeq.Add(1)))
	ul, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		return s, fmt.Errorf("bench: %w", err)
	}
	defer os.Remove(sock)
	defer ul.Close()
	cmd := exec.Command("openssl", "s_client", "-unix", sock, "-servername", c.ServerName,
		"-CAfile", c.CAFile, "-verify_return_error", "-quiet", "-tls1_3", "-groups", "X25519")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return s, fmt.Errorf("bench: %w", err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return s, fmt.Errorf("bench: %w", err)
	}
	p, err := startProcess(cmd)
	if err != nil {
		return s, err
	}
	defer p.Close()
	ul.SetDeadline(time.Now().Add(10 * time.Second))
	uc, err := ul.AcceptUnix()
	if err != nil {
		return s, fmt.Errorf("bench: s_client did not connect: %w (%s)", err, bytes.TrimSpace(p.stderr.Bytes()))
	}
	defer uc.Close()
	stopOnDone(ctx, uc)
	hello, err := readRecord(uc)
	if err != nil {
		return s, fmt.Errorf("bench: s_client's ClientHello: %w", err)
	}

	start := time.Now()
	addr, err := c.Resolve(ctx)
	if err != nil {
		return s, err
	}
	s.DNS = time.Since(start)
	tc, err := c.Host.DialContext(ctx, "tcp", c.ServerAddr(addr).String())
	if err != nil {
		return s, err
	}
	defer tc.Close()
	stopOnDone(ctx, tc)
	if _, err := tc.Write(hello); err != nil {
		return s, err
	}
	if _, err := stdin.Write(c.Request); err != nil {
		return s, fmt.Errorf("bench: s_client stdin: %w", err)
	}
	go func() {
		io.Copy(uc, tc)
		uc.CloseWrite()
	}()
	finished := make(chan time.Duration, 1)
	go func() {
		buf := make([]byte, 32<<10)
		first := true
		for {
			n, err := uc.Read(buf)
			if n > 0 {
				if first {
					finished <- time.Since(start)
					first = false
				}
				if _, err := tc.Write(buf[:n]); err != nil {
					return
				}
			}
			if err != nil {
				tc.(*net.TCPConn).CloseWrite()
				return
			}
		}
	}()
	if err := c.ReadResponse(stdout, start, &s); err != nil {
		return s, fmt.Errorf("%w (s_client: %s)", err, bytes.TrimSpace(p.stderr.Bytes()))
	}
	select {
	case t := <-finished:
		s.Handshake = t - s.DNS
	default:
		return s, errors.New("bench: response without a client Finished")
	}
	return s, nil
}

// readRecord reads one whole TLS record (RFC 8446, Section 5.1).
func readRecord(r io.Reader) ([]byte, error) {
	hdr := make([]byte, 5)
	if _, err := io.ReadFull(r, hdr); err != nil {
		return nil, err
	}
	n := int(hdr[3])<<8 | int(hdr[4])
	if hdr[0] != 22 || n > 1<<14+256 {
		return nil, fmt.Errorf("bench: not a handshake record (type %d, length %d)", hdr[0], n)
	}
	rec := make([]byte, 5+n)
	copy(rec, hdr)
	if _, err := io.ReadFull(r, rec[5:]); err != nil {
		return nil, err
	}
	return rec, nil
}
