package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
)

// The servers (serve, dns serve) log through log/slog in one format,
// chosen for every command by --log-format and --log-level. Their logs
// never carry secrets: no keys, TSIG secrets or Redis passwords.
var logOpts struct{ format, level string }

func init() {
	pf := rootCmd.PersistentFlags()
	pf.StringVar(&logOpts.format, "log-format", "text", "format of the servers' logs on standard error: text (time=... level=... msg=...) or json (one object per line)")
	pf.StringVar(&logOpts.level, "log-level", "info", "least severe server log level shown: debug, info, warn or error")
}

// newLogger is the logger of a server command, writing to w.
func newLogger(w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(logOpts.level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", logOpts.level)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch strings.ToLower(logOpts.format) {
	case "text", "":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", logOpts.format)
}

// daemons are the long-running commands. Each logs when it is asked to
// stop and when it stopped, and one that reloads on SIGHUP drops a SIGHUP
// that comes before its own handler is set (a reload right after start)
// instead of being ended by it.
var daemons = []struct {
	path    []string
	reloads bool
}{{[]string{"serve"}, true}, {[]string{"dns", "serve"}, true}, {[]string{"turbo-proxy"}, false}}

// loggedError is an error a daemon already logged: in the JSON log format
// main does not print it again as text.
type loggedError struct{ error }

func (e loggedError) Unwrap() error { return e.error }

// wrapDaemons adds the stop lines and the early SIGHUP guard to the
// daemons' RunE.
func wrapDaemons() {
	for _, d := range daemons {
		c, _, err := rootCmd.Find(d.path)
		if err != nil || c.RunE == nil {
			continue
		}
		run, reloads := c.RunE, d.reloads
		c.RunE = func(cmd *cobra.Command, args []string) error {
			if reloads {
				early := make(chan os.Signal, 1)
				signal.Notify(early, syscall.SIGHUP)
				defer signal.Stop(early)
			}
			log, lerr := newLogger(os.Stderr)
			if lerr != nil {
				return lerr
			}
			name := cmd.CommandPath()
			sig := make(chan os.Signal, 1)
			signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
			stopping := func(s os.Signal) {
				log.Info("stopping: finishing the work in flight", "command", name, "signal", s.String())
			}
			done, logged := make(chan struct{}), make(chan struct{})
			go func() {
				defer close(logged)
				select {
				case s := <-sig:
					stopping(s)
				case <-done:
					// The command may have returned on the same signal
					// (it listens too) before this goroutine ran: a
					// select with both ready picks either, so look again.
					select {
					case s := <-sig:
						stopping(s)
					default:
					}
				}
			}()
			err := run(cmd, args)
			close(done)
			<-logged // "stopping" before "stopped"
			signal.Stop(sig)
			if err != nil && strings.EqualFold(logOpts.format, "json") {
				// As text, main prints the error; as JSON it is a log line.
				log.Error("stopped", "command", name, "err", err)
				return loggedError{err}
			}
			if err != nil {
				return err
			}
			log.Info("stopped", "command", name)
			return nil
		}
	}
}

// printError prints what main reports for a failed command: every error
// as text, except a daemon's in the JSON log format, which its log line
// said already.
func printError(w io.Writer, err error) {
	var logged loggedError
	if errors.As(err, &logged) && strings.EqualFold(logOpts.format, "json") {
		return
	}
	msg := err.Error()
	if strings.HasPrefix(msg, "unknown command") && !strings.Contains(msg, "--help") {
		// Cobra's own words, with its suggestions, and where to look.
		msg = strings.TrimRight(msg, "\n") + "\nsee 'ztls --help' for the commands"
	}
	fmt.Fprintln(w, "ztls:", msg)
}

// logfFormat is how one Logf format of a package becomes a log record: a
// fixed message and a name for each argument, in order.
type logfFormat struct {
	msg   string
	attrs []string
}

// authorityLogFormats are dns/authority's Logf lines (dns serve -v).
var authorityLogFormats = map[string]logfFormat{
	"authority: udp %v: %v":                       {"udp read failed", []string{"addr", "err"}},
	"authority: accept on %v: %v; retrying in %v": {"accept failed, retrying", []string{"addr", "err", "retry_in"}},
}

// turboLogFormats are the TurboTLS proxies' Logf lines (turbo-proxy -v).
var turboLogFormats = map[string]logfFormat{
	"%s: %v": {"connection failed", []string{"remote", "err"}},
	"%s: turbo, server flight %d bytes over UDP": {"connection: turbo", []string{"remote", "server_flight_bytes"}},
	"%s: TCP only (%s)":                          {"connection: TCP only", []string{"remote", "fallback_reason"}},
	"%s: turbo %s":                               {"connection: turbo", []string{"remote", "id"}},
	"%s: TCP only":                               {"connection: TCP only", []string{"remote"}},
}

// structuredLogf adapts a package's printf-style Logf to log: a format in
// formats is logged as its message with the arguments as attributes (an
// address is an attribute, not part of the message); any other as text.
func structuredLogf(log *slog.Logger, formats map[string]logfFormat) func(string, ...any) {
	return func(format string, args ...any) {
		f, ok := formats[format]
		if !ok || len(f.attrs) != len(args) {
			log.Info(fmt.Sprintf(format, args...))
			return
		}
		attrs := make([]any, 0, 2*len(args))
		for i, a := range args {
			switch v := a.(type) {
			case error:
				a = v.Error()
			case fmt.Stringer:
				a = v.String()
			}
			attrs = append(attrs, f.attrs[i], a)
		}
		log.Info(f.msg, attrs...)
	}
}
