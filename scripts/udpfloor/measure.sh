#!/bin/sh
# measure.sh: the floor of serving DNS over UDP on this machine, measured
# as scripts/bench-dns-auth-cpu.sh measures the servers: each echo (echo.c,
# and goecho in each of its modes) pinned to SERVER_CPU, dnsperf pinned to
# the other CPUs with the standard query mix, and queries answered per
# second of the echo's CPU (utime + stime from /proc).
#
# Usage: scripts/udpfloor/measure.sh     (from the repository root)
# Environment: DURATION (8), ROUNDS (3), BATCH (32), SERVER_CPU (0),
#   UDP_CLIENTS (8), OUTSTANDING (200), BENCH_LOCK (/tmp/bench.lock), CC (cc)
set -eu
# shellcheck source=scripts/dns-bench-lib.sh
. "$(dirname "$0")/../dns-bench-lib.sh"
DURATION=${DURATION:-8}
ROUNDS=${ROUNDS:-3}
BATCH=${BATCH:-32}
SERVER_CPU=${SERVER_CPU:-0}
UDP_CLIENTS=${UDP_CLIENTS:-8}
OUTSTANDING=${OUTSTANDING:-200}
BENCH_LOCK=${BENCH_LOCK-/tmp/bench.lock}
CC=${CC:-cc}
command -v flock >/dev/null 2>&1 || BENCH_LOCK=""
for bin in dnsperf taskset "$CC" go; do
	command -v "$bin" >/dev/null 2>&1 || { echo "udpfloor: $bin not found (make deps; apt-get install gcc)" >&2; exit 1; }
done
ncpu=$(nproc)
client_cpus=$(awk -v n="$ncpu" -v s="$SERVER_CPU" 'BEGIN { for (i = 0; i < n; i++) if (i != s) l = l (l == "" ? "" : ",") i; print l }')
tck=$(getconf CLK_TCK)
work=$(mktemp -d /tmp/udpfloor.XXXXXX)
pid=""
trap 'if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; fi; rm -rf "$work"' EXIT INT TERM

here=$(cd "$(dirname "$0")" && pwd)
"$CC" -O2 -Wall -o "$work/cecho" "$here/echo.c"
(cd "$here/_goecho" && go build -o "$work/goecho" .)
standard_queries bench.test. 1000 >"$work/queries.txt"

# run NAME CMD...: one dnsperf run against CMD; prints "qps q/CPU-s".
run() {
	name=$1
	shift
	port=$(free_port 0)
	# shellcheck disable=SC2046
	taskset -c "$SERVER_CPU" $(echo "$@" | sed "s/PORT/$port/g") >"$work/$name.log" 2>&1 &
	pid=$!
	sleep 1
	t0=$(awk '{ print $14 + $15 }' /proc/$pid/stat)
	lock=""
	[ -n "$BENCH_LOCK" ] && lock="flock $BENCH_LOCK"
	$lock taskset -c "$client_cpus" dnsperf -s 127.0.0.1 -p "$port" -m udp -d "$work/queries.txt" -l "$DURATION" \
		-c "$UDP_CLIENTS" -T $((ncpu - 1)) -q "$OUTSTANDING" -t 2 >"$work/out" 2>&1 || true
	t1=$(awk '{ print $14 + $15 }' /proc/$pid/stat)
	kill "$pid"
	wait "$pid" 2>/dev/null || true
	pid=""
	awk -v t0="$t0" -v t1="$t1" -v tck="$tck" '/Queries completed:/ { q = $3 } /Queries per second:/ { qps = $4 }
		END { c = (t1 - t0) / tck; printf "%.0f %.0f\n", qps, (c > 0 ? q / c : 0) }' "$work/out"
}

echo "| echo | qps (median) | queries per echo CPU-second (median) | runs |"
echo "|---|---:|---:|---|"
for e in c go-xnet go-raw go-block; do
	case $e in
	c) cmd="$work/cecho 127.0.0.1 PORT $BATCH" ;;
	go-*) cmd="$work/goecho -mode ${e#go-} -batch $BATCH -listen 127.0.0.1:PORT" ;;
	esac
	r=0
	: >"$work/$e.res"
	while [ $r -lt "$ROUNDS" ]; do
		run "$e" "$cmd" >>"$work/$e.res"
		r=$((r + 1))
	done
	q=$(awk '{ print $1 }' "$work/$e.res" | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }')
	c=$(awk '{ print $2 }' "$work/$e.res" | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }')
	echo "| $e | $q | $c | $(awk '{ printf "%s%s", (NR > 1 ? ", " : ""), $2 }' "$work/$e.res") |"
done
