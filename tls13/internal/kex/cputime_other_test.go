//go:build !linux

package kex

import "time"

func threadCPU() (time.Duration, bool) { return 0, false }
