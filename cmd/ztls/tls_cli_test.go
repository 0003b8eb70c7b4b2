package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/ztls-project/ztls/dial"
	"github.com/ztls-project/ztls/internal/testsupport/testpki"
)

// The plain TLS 1.3 path of the CLI: serve with 0-RTT, connect storing the
// ticket, connect again resuming with the request as early data; and
// SSLKEYLOGFILE.
func TestCLIResumptionAndZeroRTT(t *testing.T) {
	dir := t.TempDir()
	ca := testpki.NewCA(t, "ecdsa-p256")
	cert, key := ca.Issue(t, testpki.LeafOpts{KeyType: "ecdsa-p256"}).WritePEM(t, dir)
	caFile := ca.WritePEM(t, dir)
	port := boundPort(t, start(t, "serving TLS 1.3", "serve", "--listen", "127.0.0.1:0", "--cert", cert, "--key", key,
		"--respond", "pong", "--early-data", "16384", "--early-window", "300ms"))
	time.Sleep(350 * time.Millisecond) // 0-RTT is refused for one window after start
	sess := filepath.Join(dir, "sess.bin")
	keylog := filepath.Join(dir, "keys.log")
	os.Setenv("SSLKEYLOGFILE", keylog)
	defer os.Unsetenv("SSLKEYLOGFILE")
	base := []string{"connect", "127.0.0.1:" + port, "--ca", caFile, "--servername", "localhost", "--mode", "tls",
		"--resolver", "127.0.0.1:9", "--json"}

	var first dial.Report
	if err := json.Unmarshal([]byte(run(t, append(base, "--data", "ping", "--sess-out", sess)...)), &first); err != nil {
		t.Fatal(err)
	}
	if first.TLS.Resumed || first.ResponseBytes != 4 {
		t.Fatalf("first connection: %+v", first)
	}
	if st, err := os.Stat(sess); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("session file: %v %v", st, err)
	}
	req := filepath.Join(dir, "req.txt")
	os.WriteFile(req, []byte("ping"), 0o644)
	var second dial.Report
	if err := json.Unmarshal([]byte(run(t, append(base, "--sess-in", sess, "--early-data", req)...)), &second); err != nil {
		t.Fatal(err)
	}
	if !second.TLS.Resumed || !second.EarlyData.Accepted || second.EarlyData.Bytes != 4 || second.ResponseBytes != 4 {
		t.Fatalf("resumed connection: %+v", second)
	}
	if !second.AnswerInFirstFlight {
		t.Fatal("the 0-RTT request was not answered in the server's first flight")
	}
	logged, err := os.ReadFile(keylog)
	if err != nil {
		t.Fatal(err)
	}
	for _, label := range []string{"CLIENT_HANDSHAKE_TRAFFIC_SECRET", "SERVER_TRAFFIC_SECRET_0", "CLIENT_EARLY_TRAFFIC_SECRET", "EXPORTER_SECRET"} {
		if !strings.Contains(string(logged), label+" ") {
			t.Fatalf("key log lacks %s", label)
		}
	}
}

func TestCLIErrorsSayWhatToDo(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"serve", "--listen", "127.0.0.1:0"}, "needs --cert and --key"},
		{[]string{"connect", "127.0.0.1:1", "--mode", "warp"}, "want auto, ztls or tls"},
		{[]string{"zdata", "new", "--host", "x.test"}, "required"},
		{[]string{"connect", "127.0.0.1:1", "--groups", "ffdhe2048"}, "unknown group"},
		{[]string{"serve", "--listen", "127.0.0.1:0", "--keyshare-pool", "-1"}, "--keyshare-pool -1: want 0 (off) or more"},
		// tls13's load errors name the files; the flag is the CLI's to add.
		{[]string{"serve", "--listen", "127.0.0.1:0", "--cert", "/nonexistent/c.pem", "--key", "/nonexistent/k.pem"}, "--cert/--key: sig: read certificate chain: open /nonexistent/c.pem"},
		{[]string{"connect", "127.0.0.1:1", "--ca", "/nonexistent/ca.pem"}, "--ca: sig: read CA certificates: open /nonexistent/ca.pem"},
	} {
		rootCmd.SetArgs(tc.args)
		err := rootCmd.Execute()
		resetFlags(rootCmd)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ztls %s: %v, want an error saying %q", strings.Join(tc.args, " "), err, tc.want)
		}
	}
}

// resetFlags puts every flag back to its default, so in-process runs of
// the command tree don't see each other's flags.
func resetFlags(c *cobra.Command) {
	c.Flags().VisitAll(func(f *pflag.Flag) {
		if f.Changed {
			if sv, ok := f.Value.(pflag.SliceValue); ok {
				sv.Replace(nil)
			} else {
				f.Value.Set(f.DefValue)
			}
			f.Changed = false
		}
	})
	for _, sub := range c.Commands() {
		resetFlags(sub)
	}
}
