//go:build !linux

package bfe

import "os"

func slotFileOf(f *os.File) slotFile { return f }
