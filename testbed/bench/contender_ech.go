package bench

// The Encrypted ClientHello contenders (issue 31; docs/ztls-spec.md,
// Section 10), each beside its twin without ECH in the same run:
//
//   - tls-ech: tls against a server with ECH keys, whose HTTPS record
//     carries them in its ech SvcParam (RFC 9848); the client (dial,
//     ECHRequire) encrypts its ClientHello to the published config.
//   - ztls-ech: ztls the same way, ZTLS inside the ClientHelloInner: the
//     ztls extension and the early data travel encrypted (Section 10.2).
//
// As `ztls serve` keeps them, the ECH keys live in a Z-data directory
// (zdata.Dir: DIR/ech, made and rotated by RotateECH; for ztls-ech the
// directory's Service is also the server's Z-data), published through
// zdata.ECHConfigList and zdata.ServiceHTTPSRecord, and accepted by the
// server through a tls13.ECHKeySet loaded from zdata.ECHServerKeys;
// every minute the keys are rotated, reloaded and republished. A sample
// counts only if dial's report says ech "accepted" (the twins' must say
// "none"). There is no ECH over TurboTLS yet (dial sends the flight of a
// service publishing ech over TCP), so no turbo form.

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/miekg/dns"

	"github.com/ztls-project/ztls/dial"
	"github.com/ztls-project/ztls/tls13"
	"github.com/ztls-project/ztls/zdata"
)

func init() {
	Register("tls-ech", func() Contender { return &engineContender{name: "tls-ech", mode: "tls", variant: variant{ech: true}} })
	Register("ztls-ech", func() Contender { return &engineContender{name: "ztls-ech", mode: "ztls", variant: variant{ech: true}} })
}

// ECHPublicName is the public name of the servers' ECH configs: the
// outer ClientHello's server_name. The benchmark's certificate does not
// cover it; a client needs it only when ECH is rejected, which the
// contenders count as an error anyway.
const ECHPublicName = "ech.ztls.test"

// echService is a server's ECH keys: a Z-data directory's, loaded into
// the set the server decrypts with.
type echService struct {
	dir *zdata.Dir
	set tls13.ECHKeySet
}

// startECH makes the server's Z-data directory under cfg.Dir with its
// ECH keys (this period's and the next, RotateECH) and loads them. The
// directory is the port's: a directory names its service's port, and
// servers of other contenders may share cfg.Dir (the BFE keys there are
// made once for them all).
func startECH(cfg ServerConfig, now time.Time) (*echService, error) {
	dir := filepath.Join(cfg.Dir, fmt.Sprintf("zdata-%d", cfg.Addr.Port()))
	d, err := zdata.NewDir(dir, zdata.ServiceConfig{Host: ServerName, Port: int(cfg.Addr.Port()),
		Cert: cfg.CertFile, Key: cfg.KeyFile}, nil, now)
	if err != nil {
		return nil, fmt.Errorf("bench: ECH: %w", err)
	}
	e := &echService{dir: d}
	if err := e.rotate(ECHPublicName, now); err != nil {
		return nil, err
	}
	return e, nil
}

// rotate rotates the directory's ECH keys (publicName "" keeps theirs)
// and loads those a server accepts at now.
func (e *echService) rotate(publicName string, now time.Time) error {
	if _, _, err := e.dir.RotateECH(publicName, now); err != nil {
		return fmt.Errorf("bench: ECH: %w", err)
	}
	keys, err := e.dir.ECHKeys()
	if err != nil {
		return fmt.Errorf("bench: ECH: %w", err)
	}
	if err := e.set.Set(zdata.ECHServerKeys(keys, now, e.dir.Service.Options.Window)); err != nil {
		return fmt.Errorf("bench: ECH: %w", err)
	}
	return nil
}

// publish rotates the keys and publishes the service's HTTPS record with
// the ech SvcParam (and no Z-data: the contenders take theirs from TXT).
func (e *echService) publish(cfg ServerConfig, now time.Time) error {
	if err := e.rotate("", now); err != nil {
		return err
	}
	keys, err := e.dir.ECHKeys()
	if err != nil {
		return fmt.Errorf("bench: ECH: %w", err)
	}
	list, err := zdata.ECHConfigList(keys, now)
	if err != nil || len(list) == 0 {
		return fmt.Errorf("bench: ECH: no config to publish (%v)", err)
	}
	rr, err := zdata.ServiceHTTPSRecord(ServerName, int(cfg.Addr.Port()), nil, now, 5*time.Minute, zdata.HTTPSOptions{ECH: list, NoZData: true})
	if err != nil {
		return fmt.Errorf("bench: ECH: %w", err)
	}
	cfg.Publish([]dns.RR{rr})
	return nil
}

// checkECHReport: an ECH contender's visit had ECH accepted; any other
// went without ECH.
func checkECHReport(name string, ech bool, r dial.Report) error {
	switch {
	case ech && r.ECH != "accepted":
		return fmt.Errorf("bench: %s: ECH %q, want accepted (retried %v)", name, r.ECH, r.ECHRetried)
	case !ech && r.ECH != dial.ECHReportNone && r.ECH != "":
		return fmt.Errorf("bench: %s: ECH %q without ECH keys", name, r.ECH)
	}
	return nil
}
