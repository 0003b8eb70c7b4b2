package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/ztls-project/ztls/internal/metrics"
	"github.com/ztls-project/ztls/zdata/redisreg"
)

// envRedisPassword names the environment variable that holds the fleet
// Redis's password when neither the --strike-register URL nor
// --strike-register-password-file gives one: unlike the command line, the
// environment does not show in ps.
const envRedisPassword = "REDIS_PASSWORD"

// strikeTLSFlags are how 'serve' and 'register check' log in to the
// register's Redis beyond its URL.
type strikeTLSFlags struct {
	ca, cert, key string
	passwordFile  string
}

func (t *strikeTLSFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&t.passwordFile, "strike-register-password-file", "", "read the Redis password from FILE (owner-only, chmod 600) rather than from the URL or $"+envRedisPassword)
	fs.StringVar(&t.ca, "strike-register-ca", "", "with rediss://: verify Redis's (and the Sentinels') certificates against the CA certificates in FILE (PEM) instead of the system's roots")
	fs.StringVar(&t.cert, "strike-register-cert", "", "with rediss://: present the certificate chain in FILE (PEM) to Redis, for mutual TLS (with --strike-register-key)")
	fs.StringVar(&t.key, "strike-register-key", "", "with --strike-register-cert: its private key (PEM)")
}

// redisTarget is where the fleet's register lives and how to log in.
type redisTarget struct {
	opts     redisreg.Options // what ParseURL read, with the password and TLS settled
	shown    string           // the URL with its password masked: for errors and logs
	auth     string           // where the password came from, for the log
	tlsShown string           // "off", or what verifies Redis, for the log
}

// redisTarget reads the register's URL from --strike-register or
// --strike-register-file, its password from the URL, else
// --strike-register-password-file, else $REDIS_PASSWORD, and its TLS
// settings. Nothing it returns or logs holds the password but opts.
func (f *serveFlags) redisTarget() (redisTarget, error) {
	flag, raw := "--strike-register", f.strike
	if f.strikeFile != "" {
		if f.strike != "" {
			return redisTarget{}, errors.New("give --strike-register or --strike-register-file, not both")
		}
		var err error
		if raw, err = readSecretFile(f.strikeFile); err != nil {
			return redisTarget{}, fmt.Errorf("--strike-register-file: %w", err)
		}
		flag = "--strike-register-file " + f.strikeFile
	}
	return parseRedisURL(flag, raw, f.strikeTLS, os.Getenv(envRedisPassword))
}

// parseRedisURL reads the register's URL; t gives the password file and
// TLS files, envPassword the password used when neither the URL nor the
// file has one.
func parseRedisURL(flag, raw string, t strikeTLSFlags, envPassword string) (redisTarget, error) {
	r := redisTarget{shown: redisreg.RedactURL(raw), tlsShown: "off"}
	o, err := redisreg.ParseURL(raw)
	if err != nil {
		return r, fmt.Errorf("%s: %v", flag, err)
	}
	switch {
	case o.Password != "" && t.passwordFile != "":
		return r, fmt.Errorf("%s: the URL has a password and --strike-register-password-file gives one: give it once", flag)
	case o.Password != "":
		r.auth = "password from the URL"
	case t.passwordFile != "":
		if o.Password, err = readSecretFile(t.passwordFile); err != nil {
			return r, fmt.Errorf("--strike-register-password-file: %w", err)
		}
		r.auth = "password from " + t.passwordFile
	case envPassword != "":
		o.Password, r.auth = envPassword, "password from $"+envRedisPassword
	default:
		r.auth = "none"
	}
	if o.Username != "" {
		r.auth += ", user " + o.Username
	}
	if o.TLS == nil {
		if t.ca != "" || t.cert != "" || t.key != "" {
			return r, fmt.Errorf("%s: --strike-register-ca, --strike-register-cert and --strike-register-key are for TLS: use rediss://, rediss-sentinel:// or rediss-cluster://", flag)
		}
		r.opts = o
		return r, nil
	}
	r.tlsShown = "Redis verified against the system's roots"
	if t.ca != "" {
		pem, err := os.ReadFile(t.ca)
		if err != nil {
			return r, fmt.Errorf("--strike-register-ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return r, fmt.Errorf("--strike-register-ca: no PEM certificate in %s", t.ca)
		}
		o.TLS.RootCAs, r.tlsShown = pool, "Redis verified against "+t.ca
	}
	if (t.cert == "") != (t.key == "") {
		return r, errors.New("--strike-register-cert and --strike-register-key go together")
	}
	if t.cert != "" {
		pair, err := tls.LoadX509KeyPair(t.cert, t.key)
		if err != nil {
			return r, fmt.Errorf("--strike-register-cert: %w", err)
		}
		o.TLS.Certificates = []tls.Certificate{pair}
		r.tlsShown += ", client certificate " + t.cert
	}
	r.opts = o
	return r, nil
}

// strikeMetrics exports the register's round trips to Redis.
func strikeMetrics(mt *metrics.Registry, reg *redisreg.Register) {
	mt.CounterFunc("ztls_strike_register_round_trips_total", "Commands and scripts sent to the strike register's Redis.",
		func() float64 { return float64(reg.Stats().RoundTrips) })
	mt.CounterFunc("ztls_strike_register_redis_errors_total", "Round trips to the strike register's Redis that failed (unreachable, timeout, error reply); early data is refused for each.",
		func() float64 { return float64(reg.Stats().Errors) })
	mt.CounterFunc("ztls_strike_register_round_trip_seconds_total", "Time spent in round trips to the strike register's Redis (divide by ztls_strike_register_round_trips_total for the mean).",
		func() float64 { return reg.Stats().Latency.Seconds() })
}

// quietRedis drops go-redis's own log lines (dial retries, Sentinel
// switches): what matters reaches the log as the register's errors, in
// each refused early-data line, and the metrics count them.
type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}

var registerCmd = &cobra.Command{
	Use:   "register",
	Short: "Inspect the fleet's shared anti-replay register (--strike-register)",
}

func init() {
	goredis.SetLogger(quietRedis{})
	groupCommand(registerCmd)
	rootCmd.AddCommand(registerCmd)
	var t strikeTLSFlags
	var file string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "check URL",
		Short: "Connect to the register's Redis and report mode, maxmemory-policy, memory since, latency",
		Long: `Connect to the Redis a fleet shares as its strike register, as 'ztls serve
--strike-register URL' does, and report what it found without changing
anything: the mode (one primary, Sentinel or Cluster), Redis's
maxmemory-policy (the register refuses early data unless it is noeviction),
since when each hash tag's memory is complete (early data made before it,
plus --max-clock-skew, is refused: a FLUSHALL, a restart, a failover), and
one round trip's latency. The password is never shown.

The exit status is 0 when the register would take early data made now,
1 when not or Redis failed.`,
		Example: `  ztls register check redis://127.0.0.1:6379
  REDIS_PASSWORD=... ztls register check rediss://ztls@redis.internal:6380 --strike-register-ca redis-ca.pem
  ztls register check redis-sentinel://ztls@10.0.0.1:26379,10.0.0.2:26379,10.0.0.3:26379/ztls --strike-register-password-file /etc/ztls/redis.pw`,
		Args: cobra.RangeArgs(0, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			f := &serveFlags{strikeFile: file, strikeTLS: t}
			if len(args) == 1 {
				f.strike = args[0]
			}
			if f.strike == "" && f.strikeFile == "" {
				return errors.New("register check: give the register's URL, or --strike-register-file FILE")
			}
			r, err := f.redisTarget()
			if err != nil {
				return err
			}
			r.opts.Timeout = timeout
			reg, err := redisreg.New(r.opts)
			if err != nil {
				return err
			}
			defer reg.Close()
			fmt.Fprintf(cmd.OutOrStdout(), "url: %s\nauth: %s\ntls: %s\n", r.shown, r.auth, r.tlsShown)
			ctx, cancel := context.WithTimeout(cmd.Context(), 4*timeout)
			defer cancel()
			rep, err := reg.Check(ctx)
			if err != nil {
				return fmt.Errorf("register check: %w", err)
			}
			fmt.Fprint(cmd.OutOrStdout(), rep)
			if _, complete := rep.MemorySince(); rep.Policy != "noeviction" || !complete {
				return fmt.Errorf("register check: early data would be refused (maxmemory-policy %s, memory of every tag complete: %v)", rep.Policy, complete)
			}
			return nil
		},
	}
	fs := cmd.Flags()
	t.register(fs)
	fs.StringVar(&file, "strike-register-file", "", "read the URL (with its password) from FILE (owner-only)")
	fs.DurationVar(&timeout, "timeout", 2*time.Second, "per round trip")
	cmd.Flags().SortFlags = false
	registerCmd.AddCommand(cmd)
}
