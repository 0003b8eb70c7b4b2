#!/bin/sh
# Benchmarks the T-DNS resolver against a loopback Unbound (started by the
# benchmark itself, stub zone at the project's authority, warm cache) and
# prints the medians and the ratios reported in docs/dns-resolver-bench.md.
#
#   scripts/bench-dns-resolver.sh [COUNT] [BENCHTIME] [RTT_BENCHTIME]
#   (defaults 5, 3000x, 100x; about two minutes)
#
# Raw `go test -bench` output is kept in $OUT (default
# /tmp/bench-dns-resolver.txt) for benchstat. ZTLS_BENCH_UNBOUND adds
# ";"-separated unbound.conf lines to the benchmark's Unbound, e.g.
# ZTLS_BENCH_UNBOUND="num-threads: 2" (default: none, one thread).
set -eu
COUNT=${1:-5}
BENCHTIME=${2:-3000x}
RTT_BENCHTIME=${3:-100x}
OUT=${OUT:-/tmp/bench-dns-resolver.txt}
cd "$(dirname "$0")/.."
command -v unbound >/dev/null 2>&1 || [ -x /usr/sbin/unbound ] || {
	echo "unbound is not installed (make deps)" >&2; exit 1; }

{
	go test -run '^$' -bench '^BenchmarkUnbound(Floor)?$' -benchtime "$BENCHTIME" -count "$COUNT" ./dns/resolver/
	go test -run '^$' -bench '^BenchmarkUnboundRTT$' -benchtime "$RTT_BENCHTIME" -count "$COUNT" ./dns/resolver/
} | tee "$OUT"

awk '
/^BenchmarkUnbound(RTT|Floor)?\// {
	name = $1; sub(/^Benchmark/, "", name); sub(/-[0-9]+$/, "", name)
	n[name]++; v[name, n[name]] = $3
}
function median(k,    i, j, t, a, c) {
	c = n[k]
	if (c == 0) return 0
	for (i = 1; i <= c; i++) a[i] = v[k, i]
	for (i = 2; i <= c; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
	return (c % 2) ? a[(c + 1) / 2] : (a[c / 2] + a[c / 2 + 1]) / 2
}
function report(bench, title,    i, t, tr) {
	printf "\n== %s: median of %d runs, microseconds per operation\n", title, n[bench "/udp/A"]
	split("udp tcp tls", tr, " ")
	printf "%-6s %10s %10s %10s %10s\n", "", "A", "quad", "service", "quad-gor."
	for (i = 1; i <= 3; i++) {
		t = bench "/" tr[i]; m[t "/A"] = median(t "/A"); m[t "/quad"] = median(t "/quad"); m[t "/service"] = median(t "/service")
		m[t "/quad-goroutines"] = median(t "/quad-goroutines")
		printf "%-6s %10.1f %10.1f %10.1f %10.1f\n", tr[i], m[t "/A"] / 1000, m[t "/quad"] / 1000, m[t "/service"] / 1000, m[t "/quad-goroutines"] / 1000
	}
	printf "(a) parallel lookup vs lone A (target <= 1.1x)\n"
	for (i = 1; i <= 3; i++) {
		t = bench "/" tr[i]
		printf "  %-4s A+AAAA+TXT+TLSA / A = %.2fx   all six / A = %.2fx   four goroutines / A = %.2fx\n", tr[i], m[t "/quad"] / m[t "/A"], m[t "/service"] / m[t "/A"], m[t "/quad-goroutines"] / m[t "/A"]
	}
	printf "(b) per-query latency on a reused connection vs UDP (target <= 1.1x)\n"
	printf "  tls/A / udp/A = %.2fx   tcp/A / udp/A = %.2fx\n", m[bench "/tls/A"] / m[bench "/udp/A"], m[bench "/tcp/A"] / m[bench "/udp/A"]
}
END {
	report("Unbound", "loopback, no added delay")
	report("UnboundRTT", "10 ms round trip (delaying proxy)")
	printf "\n== floor: bare client, no checks or parsing (BenchmarkUnboundFloor), loopback, microseconds\n"
	for (i = 1; i <= 2; i++) {
		t = "UnboundFloor/" (i == 1 ? "udp" : "tcp")
		a = median(t "/A"); q = median(t "/quad")
		if (a > 0) printf "  %-4s A %8.1f   quad %8.1f   quad / A = %.2fx\n", (i == 1 ? "udp" : "tcp"), a / 1000, q / 1000, q / a
	}
}' "$OUT"
