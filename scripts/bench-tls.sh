#!/bin/sh
# bench-tls.sh: the ztls TLS 1.3 engine against Go's crypto/tls, measured
# in one `go test -bench` run of package tls13 (tls13/bench_test.go), and
# summarised as a Markdown table of medians and ratios.
#
# Usage: scripts/bench-tls.sh [raw-output-file]     (from the repository root)
#        scripts/bench-tls.sh -summarise FILE        (only summarise earlier output)
# Environment:
#   COUNT   runs of each benchmark; the median is reported (default 3)
#   BENCH   benchmark regexp (default .)
#   BENCHTIME  go test -benchtime (default 1s)
#   GO      the go command (default go)
#   RUSTLS_BENCH  the rustls benchmark peer (bench/rustls, built by
#           `make bench-rustls`, which sets this): its in-memory handshakes,
#           with an ECDSA P-256 CA and leaf made by openssl, run in COUNT
#           rounds alternating with the Go benchmarks (one run of each per
#           round), and are summarised beside them
#
# Ratios are "ztls is N times as fast": for handshakes gotls ns/op divided
# by ztls ns/op, for bulk ztls MB/s divided by gotls MB/s. Targets:
# handshakes >= 1.0, bulk >= 0.9.
set -eu

COUNT=${COUNT:-3}
BENCH=${BENCH:-.}
BENCHTIME=${BENCHTIME:-1s}
GO=${GO:-go}

summarise() {
	awk '
	# median of v[1..n]
	function median(v, n,    i, j, t) {
		for (i = 2; i <= n; i++)
			for (j = i; j > 1 && v[j-1] > v[j]; j--) { t = v[j]; v[j] = v[j-1]; v[j-1] = t }
		if (n % 2) return v[(n+1)/2]
		return (v[n/2] + v[n/2+1]) / 2
	}
	/^Benchmark/ {
		name = $1
		sub(/-[0-9]+$/, "", name)
		if (!(name in seen)) { seen[name] = 1; order[++nnames] = name }
		runs[name]++
		for (i = 3; i < NF; i += 2) {
			key = name SUBSEP $(i+1)
			cnt[key]++
			val[key, cnt[key]] = $i
		}
	}
	function med(name, unit,    key, n, i, v) {
		key = name SUBSEP unit
		n = cnt[key]
		if (!n) return ""
		for (i = 1; i <= n; i++) v[i] = val[key, i]
		return median(v, n)
	}
	# sides prints, under title, the client and server
	# working time of each handshake against the same benchmark of refimpl.
	function sides(refimpl, title,    k, name, group, impl, ref) {
		print ""
		print title
		print ""
		print "| benchmark | impl | client | server |"
		print "|---|---|---:|---:|"
		for (k = 1; k <= nnames; k++) {
			name = order[k]
			group = name; impl = name
			sub(/\/[^\/]*$/, "", group); sub(/^.*\//, "", impl)
			sub(/^Benchmark/, "", group)
			ref = "Benchmark" group "/" refimpl
			if (impl == refimpl || !(ref in seen) || med(name, "client-ns/op") == "") continue
			printf "| %s | %s | %s | %s |\n", group, impl,
				ratio(med(ref, "client-ns/op"), med(name, "client-ns/op")),
				ratio(med(ref, "server-ns/op"), med(name, "server-ns/op"))
		}
	}
	function fmt(x) { return x == "" ? "-" : sprintf(x >= 100 ? "%.0f" : "%.2f", x) }
	function ratio(a, b) { return (a == "" || b == "" || b == 0) ? "-" : sprintf("%.2f", a / b) }
	END {
		print "| benchmark | impl | ns/op | MB/s | client-ns/op | server-ns/op | B/op | allocs/op | speed vs gotls |"
		print "|---|---|---:|---:|---:|---:|---:|---:|---:|"
		for (k = 1; k <= nnames; k++) {
			name = order[k]
			group = name; impl = name
			sub(/\/[^\/]*$/, "", group); sub(/^.*\//, "", impl)
			sub(/^Benchmark/, "", group)
			ref = "Benchmark" group "/gotls"
			r = "-"
			if (impl != "gotls" && (ref in seen)) {
				if (med(name, "MB/s") != "")
					r = ratio(med(name, "MB/s"), med(ref, "MB/s"))
				else
					r = ratio(med(ref, "ns/op"), med(name, "ns/op"))
			}
			printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", group, impl,
				fmt(med(name, "ns/op")), fmt(med(name, "MB/s")),
				fmt(med(name, "client-ns/op")), fmt(med(name, "server-ns/op")),
				fmt(med(name, "B/op")), fmt(med(name, "allocs/op")), r
		}
		if (("BenchmarkHandshake/x25519-ecdsa-aes128/rustls") in seen)
			sides("rustls", "Per-side ratios against rustls (rustls / ztls working time: above 1, ztls is faster):")
		sides("gotls", "Per-side ratios (gotls / ztls working time, handshakes):")
	}' "$1"
}

if [ "${1:-}" = "-summarise" ]; then
	summarise "$2"
	exit 0
fi

raw=${1:-$(mktemp /tmp/bench-tls.XXXXXX)}
work=$(mktemp -d /tmp/bench-tls.XXXXXX)
trap 'rm -rf "$work"' EXIT
# One test binary for every round, run in the package's directory (its
# tests read testdata/ there).
$GO test -c -o "$work/tls13.test" ./tls13/
rungo() {
	(cd tls13 && "$work/tls13.test" -test.run '^$' -test.bench "$BENCH" -test.benchmem \
		-test.benchtime "$BENCHTIME" -test.count "$1")
}
echo "# tls13.test -test.bench '$BENCH' -test.benchmem -test.benchtime $BENCHTIME" >&2
echo "# raw output: $raw" >&2
: >"$raw"
if [ -z "${RUSTLS_BENCH:-}" ]; then
	rungo "$COUNT" | tee -a "$raw" >&2
else
	pki=$work/pki
	mkdir "$pki"
	(
		cd "$pki"
		openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout ca.key -out ca.pem \
			-subj /CN=ztls-bench-ca -days 2 2>/dev/null
		openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout leaf.key -out leaf.csr \
			-subj /CN=localhost 2>/dev/null
		printf 'subjectAltName=DNS:localhost\nbasicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n' >ext
		openssl x509 -req -in leaf.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 -out leaf.pem -extfile ext 2>/dev/null
	)
	secs=${BENCHTIME%s}
	case $secs in *[!0-9.]*|"") secs=1 ;; esac
	# Rounds alternate the Go benchmarks and rustls, so that the machine's
	# drift over the run (other VMs, frequency) falls on all three alike.
	i=0
	while [ "$i" -lt "$COUNT" ]; do
		i=$((i + 1))
		echo "# round $i of $COUNT: Go benchmarks, then $RUSTLS_BENCH" >&2
		rungo 1 | tee -a "$raw" >&2
		"$RUSTLS_BENCH" "$pki/ca.pem" "$pki/leaf.pem" "$pki/leaf.key" "$secs" | tee -a "$raw" >&2
	done
fi
summarise "$raw"
