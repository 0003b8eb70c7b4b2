package tls13

import (
	"fmt"

	"github.com/ztls-project/ztls/tls13/internal/ech"
)

// ECHConfigInfo is what a tool shows of one ECHConfig (RFC 9849, Section
// 4): its id, public name and the usability a client would see.
type ECHConfigInfo struct {
	ConfigID   uint8
	PublicName string
	// Usable says whether this engine's client could use the config (a
	// KEM and an HPKE suite it implements, no mandatory extension).
	Usable bool
}

// ParseECHConfigList reads an ECHConfigList (the ech SvcParam, RFC 9848)
// and describes its configs of version 0xfe0d, in order; an error when
// it is malformed, and none usable is not an error (see Usable).
func ParseECHConfigList(list []byte) ([]ECHConfigInfo, error) {
	configs, err := ech.ParseConfigList(list)
	if err != nil {
		return nil, fmt.Errorf("tls13: %w", err)
	}
	var out []ECHConfigInfo
	for _, c := range configs {
		cfg := &Config{ECHConfigList: mustList(c)}
		_, err := cfg.echClientConfig()
		out = append(out, ECHConfigInfo{ConfigID: c.ConfigID, PublicName: c.PublicName, Usable: err == nil})
	}
	return out, nil
}

// mustList is a list of the one config c (its Raw bytes, as parsed).
func mustList(c *ech.Config) []byte {
	n := len(c.Raw)
	return append([]byte{byte(n >> 8), byte(n)}, c.Raw...)
}
