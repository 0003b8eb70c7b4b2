package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"

	"github.com/spf13/cobra"
)

// The testbed (bench, demo) is a command of its own, ztls-bench, so this
// binary carries no benchmark contenders, plotting or QUIC. 'ztls bench'
// and 'ztls demo' run it in this process's place with the same arguments.

// benchEnv names a ztls-bench to run instead of looking for one.
const benchEnv = "ZTLS_BENCH"

func init() {
	for _, c := range []struct{ name, short string }{
		{"bench", "Measure first-response times over emulated WAN links (runs ztls-bench bench)"},
		{"demo", "See ZTLS save a round trip: first visits over an emulated 40 ms link (runs ztls-bench demo)"},
	} {
		name := c.name
		rootCmd.AddCommand(&cobra.Command{
			Use:   name + " [flags]",
			Short: c.short,
			Long: c.short + `.

The testbed lives in its own command, ztls-bench, so that ztls itself carries
no benchmark contenders, plotting or QUIC. 'ztls ` + name + ` ARGS' runs
'ztls-bench ` + name + ` ARGS': the ztls-bench next to this ztls, or the one on
the PATH, or $` + benchEnv + `. 'ztls ` + name + ` --help' shows its flags.`,
			DisableFlagParsing: true,
			RunE: func(_ *cobra.Command, args []string) error {
				return execBench(name, args)
			},
		})
	}
}

// findBench returns the ztls-bench to run: $ZTLS_BENCH, the one in this
// executable's directory, or the one on the PATH.
func findBench() (string, error) {
	if p := os.Getenv(benchEnv); p != "" {
		return p, nil
	}
	if exe, err := os.Executable(); err == nil {
		if exe, err = filepath.EvalSymlinks(exe); err == nil {
			p := filepath.Join(filepath.Dir(exe), "ztls-bench")
			if _, err := os.Stat(p); err == nil {
				return p, nil
			}
		}
	}
	if p, err := exec.LookPath("ztls-bench"); err == nil {
		return p, nil
	}
	return "", errors.New("the testbed is the ztls-bench command, which was not found next to ztls or on the PATH: " +
		"build both with 'make build' (bin/ztls, bin/ztls-bench), or install it with " +
		"'go install github.com/ztls-project/ztls/cmd/ztls-bench@latest', or set " + benchEnv + " to its path")
}

// execBench replaces this process with 'ztls-bench sub args...'.
func execBench(sub string, args []string) error {
	p, err := findBench()
	if err != nil {
		return fmt.Errorf("%s: %w", sub, err)
	}
	argv := append([]string{p, sub}, args...)
	if err := syscall.Exec(p, argv, os.Environ()); err != nil {
		return fmt.Errorf("%s: running %s: %w", sub, p, err)
	}
	return nil // not reached: Exec returned no error only by replacing us
}
