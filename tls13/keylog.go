package tls13

import (
	"fmt"
	"sync"
)

var keyLogMu sync.Mutex

// keyLog writes one line of the NSS key log format when the user asked for
// it with Config.KeyLogWriter (SSLKEYLOGFILE). Nothing else ever prints secrets.
func (e *engine) keyLog(label string, clientRandom, secret []byte) {
	w := e.cfg.KeyLogWriter
	if w == nil {
		return
	}
	keyLogMu.Lock()
	defer keyLogMu.Unlock()
	fmt.Fprintf(w, "%s %x %x\n", label, clientRandom, secret)
}
