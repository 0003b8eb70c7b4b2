package main

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
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
