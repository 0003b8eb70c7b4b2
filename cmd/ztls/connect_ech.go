package main

import (
	"github.com/spf13/pflag"

	"github.com/ztls-project/ztls/dial"
)

// registerECH adds --ech and --no-ech to connect and get
// (dial.Options.ECH; docs/ztls-spec.md, Section 10): by default ECH is
// used when the service's HTTPS record publishes ech.
func (f *connectFlags) registerECH(fs *pflag.FlagSet) {
	fs.BoolVar(&f.echRequire, "ech", false, "require Encrypted ClientHello: fail unless the service's HTTPS record publishes ech and the server accepts it (after one retry with its retry configs), so the server name and the Z-data never go in clear; without it ECH is used whenever the record publishes ech")
	fs.BoolVar(&f.echOff, "no-ech", false, "never use Encrypted ClientHello, even when the HTTPS record publishes ech")
}

// echMode is the dial.ECHMode the flags ask for.
func (f *connectFlags) echMode() dial.ECHMode {
	switch {
	case f.echRequire:
		return dial.ECHRequire
	case f.echOff:
		return dial.ECHOff
	}
	return dial.ECHAuto
}
