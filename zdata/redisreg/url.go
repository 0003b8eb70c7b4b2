package redisreg

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
)

// URLForms is the syntax ParseURL reads, for messages.
const URLForms = "redis://[USER[:PASSWORD]@]HOST:PORT[/DB], rediss://... (TLS), " +
	"redis-sentinel://[USER[:PASSWORD]@]HOST:PORT[,HOST:PORT...]/MASTER[/DB], " +
	"redis-cluster://[USER[:PASSWORD]@]HOST:PORT[,HOST:PORT...] (rediss-sentinel:// and rediss-cluster:// with TLS); " +
	"percent-encode @ / ? # % in the user and password"

// ParseURL reads where a register's Redis is and how to log in:
//
//	redis://[USER[:PASSWORD]@]HOST:PORT[/DB]            one primary
//	redis-sentinel://[USER[:PASSWORD]@]HOST:PORT[,HOST:PORT...]/MASTER[/DB]
//	redis-cluster://[USER[:PASSWORD]@]HOST:PORT[,HOST:PORT...]
//
// and the same with rediss, rediss-sentinel and rediss-cluster for TLS,
// for which Options.TLS is set to a configuration that verifies Redis's
// certificate against the system's roots (replace its RootCAs with the
// CA that issued Redis's certificates, and add Certificates for mutual
// TLS). With Sentinel, USER and PASSWORD log in to the Redis servers, not
// to the Sentinels. Only the mode, addresses, MasterName, Username,
// Password, DB and TLS of the result are set. Errors show the URL with
// its user and password masked (RedactURL).
func ParseURL(raw string) (Options, error) {
	var o Options
	bad := func(why string) (Options, error) {
		return Options{}, fmt.Errorf("redisreg: %s in %q; want %s", why, RedactURL(raw), URLForms)
	}
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return bad("no scheme")
	}
	tlsOn := false
	switch scheme {
	case "redis", "rediss":
		o.Mode = ModeSingle
	case "redis-sentinel", "rediss-sentinel":
		o.Mode = ModeSentinel
	case "redis-cluster", "rediss-cluster":
		o.Mode = ModeCluster
	default:
		return bad("unknown scheme")
	}
	tlsOn = strings.HasPrefix(scheme, "rediss")
	authority, path, _ := strings.Cut(rest, "/")
	// An @ after the first / is a password holding an unescaped / (or a
	// path holding @): refused rather than sent to a host made of the
	// password's first part.
	if strings.Contains(path, "@") || strings.ContainsAny(rest, "?#") {
		return bad("an unescaped / ? or # (or an @ in the path)")
	}
	if at := strings.LastIndex(authority, "@"); at >= 0 {
		user, pass, hasPass := strings.Cut(authority[:at], ":")
		var err error
		if o.Username, err = url.PathUnescape(user); err != nil {
			return bad("a bad escape in the user")
		}
		if hasPass {
			if o.Password, err = url.PathUnescape(pass); err != nil {
				return bad("a bad escape in the password")
			}
		}
		authority = authority[at+1:]
	}
	var addrs []string
	for _, a := range strings.Split(authority, ",") {
		host, port, err := net.SplitHostPort(a)
		if err != nil || host == "" || port == "" || strings.Contains(host, "@") {
			return bad("not HOST:PORT")
		}
		if _, err := strconv.ParseUint(port, 10, 16); err != nil {
			return bad("a bad port")
		}
		addrs = append(addrs, a)
	}
	db := func(s string) error {
		if s == "" {
			return nil
		}
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return errors.New("a bad DB number")
		}
		o.DB = n
		return nil
	}
	switch o.Mode {
	case ModeSingle:
		if len(addrs) != 1 {
			return bad("more than one address (redis-sentinel:// or redis-cluster:// take several)")
		}
		o.Addr = addrs[0]
		if err := db(path); err != nil {
			return bad(err.Error())
		}
	case ModeSentinel:
		o.Addrs = addrs
		master, dbs, _ := strings.Cut(path, "/")
		if master == "" {
			return bad("no MASTER name")
		}
		o.MasterName = master
		if err := db(dbs); err != nil {
			return bad(err.Error())
		}
	case ModeCluster:
		o.Addrs = addrs
		if path != "" {
			return bad("a path (a Redis Cluster has no DB and no MASTER name)")
		}
	}
	if tlsOn {
		o.TLS = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	return o, nil
}

// RedactURL is raw with the user and password (what stands between the
// scheme and the last @ before the path) masked as url.URL.Redacted masks
// a password. It works on the text rather than on a parse, which would
// take a password holding an unescaped / ? or # for the host and path. A
// user name is shown; text with no colon may be a password that lacks the
// colon before it, and is masked whole.
func RedactURL(raw string) string {
	at := strings.LastIndex(raw, "@")
	if at < 0 {
		return raw
	}
	start := 0
	if i := strings.Index(raw[:at], "://"); i >= 0 {
		start = i + len("://")
	}
	masked := "xxxxx"
	if colon := strings.IndexByte(raw[start:at], ':'); colon >= 0 {
		masked = raw[start:start+colon] + ":xxxxx"
	}
	return raw[:start] + masked + raw[at:]
}
