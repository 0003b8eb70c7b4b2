#!/bin/sh
# bench-dns-auth-cpu.sh: the authority ("ztls dns serve") against BIND 9,
# Knot DNS and NSD, per query and per server CPU-second. Each server runs
# pinned to one CPU (SERVER_CPU), dnsperf to the others, on loopback, the
# same zone for all; the runs of one cell alternate between the servers.
# For each run it reads the server's process tree's utime + stime from
# /proc before and after, so "queries per server CPU-second" measures the
# server and not the client (on 2 CPUs one dnsperf cannot saturate one
# server core over UDP: queries per second then measure dnsperf).
#
# Usage: scripts/bench-dns-auth-cpu.sh     (from the repository root)
# Environment:
#   DURATION   seconds per dnsperf run (default 8)
#   ROUNDS     runs per server and cell; medians are reported (default 3)
#   NAMES      names in the zone (default 1000)
#   MIXES      query mixes (default "standard distinct"): standard is
#              bench-dns-auth.sh's mix (1000 names, answers repeat, so the
#              authority's answer cache hits); distinct asks mostly
#              names asked once (the cache misses)
#   MODES      transports (default "udp tcp dot")
#   SERVERS    (default "ztls bind knot nsd")
#   SERVER_CPU the CPU the servers run on (default 0); dnsperf gets the rest
#   UDP_CLIENTS, TCP_CLIENTS, OUTSTANDING   dnsperf -c and -q (8, 16, 200)
#   RAW_DIR    if set, each dnsperf output is kept there
#   BENCH_LOCK a file each run holds with flock (default /tmp/bench.lock)
# Knot DNS 3.2 serves no DNS over TLS: its dot cells say n/a.
set -eu
# shellcheck source=scripts/dns-bench-lib.sh
. "$(dirname "$0")/dns-bench-lib.sh"

DURATION=${DURATION:-8}
ROUNDS=${ROUNDS:-3}
NAMES=${NAMES:-1000}
MIXES=${MIXES:-standard distinct}
MODES=${MODES:-udp tcp dot}
SERVERS=${SERVERS:-ztls bind knot nsd}
SERVER_CPU=${SERVER_CPU:-0}
UDP_CLIENTS=${UDP_CLIENTS:-8}
TCP_CLIENTS=${TCP_CLIENTS:-16}
OUTSTANDING=${OUTSTANDING:-200}
GO=${GO:-go}
BENCH_LOCK=${BENCH_LOCK-/tmp/bench.lock}
command -v flock >/dev/null 2>&1 || BENCH_LOCK=""

path_of() { command -v "$1" 2>/dev/null || { [ -x "/usr/sbin/$1" ] && echo "/usr/sbin/$1"; } || true; }
for bin in dnsperf dig openssl taskset; do
	[ -n "$(path_of $bin)" ] || { echo "bench-dns-auth-cpu: $bin not found (make deps)" >&2; exit 1; }
done
NAMED=$(path_of named)
KNOTD=$(path_of knotd)
NSD=$(path_of nsd)
for s in $SERVERS; do
	case $s in
	bind) [ -n "$NAMED" ] || { echo "bench-dns-auth-cpu: named not found (make deps)" >&2; exit 1; } ;;
	knot) [ -n "$KNOTD" ] || { echo "bench-dns-auth-cpu: knotd not found (make deps)" >&2; exit 1; } ;;
	nsd) [ -n "$NSD" ] || { echo "bench-dns-auth-cpu: nsd not found (make deps)" >&2; exit 1; } ;;
	ztls) ;;
	*) echo "bench-dns-auth-cpu: unknown server $s" >&2; exit 2 ;;
	esac
done
ncpu=$(nproc)
[ "$ncpu" -ge 2 ] || { echo "bench-dns-auth-cpu: needs 2 CPUs (one for the servers, one for dnsperf)" >&2; exit 1; }
client_cpus=$(awk -v n="$ncpu" -v s="$SERVER_CPU" 'BEGIN { for (i = 0; i < n; i++) if (i != s) l = l (l == "" ? "" : ",") i; print l }')
client_threads=$((ncpu - 1))
tck=$(getconf CLK_TCK)

work=$(mktemp -d /tmp/bench-dns-auth-cpu.XXXXXX)
pid=""
stop_server() {
	if [ -n "$pid" ]; then
		kill "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	fi
	pid=""
}
cleanup() {
	stop_server
	rm -rf "$work"
}
trap cleanup EXIT INT TERM

echo "bench-dns-auth-cpu: building ztls" >&2
$GO build -o "$work/ztls-bin" ./cmd/ztls

zone=bench.test.
bench_zone "$zone" "$NAMES" >"$work/zone.db"
# standard: bench-dns-auth.sh's mix. distinct: 200 000 questions, most
# asked once: random labels under the zone (NXDOMAIN), and the zone's
# names with random case (each spelling a new cache key).
standard_queries "$zone" "$NAMES" >"$work/queries-standard.txt"
awk -v n="$NAMES" -v z="$zone" 'BEGIN {
	srand(2)
	for (k = 0; k < 200000; k++) {
		if (rand() < 0.5) { printf "x%d-%d.%s A\n", k, int(rand() * 1e9), z; continue }
		name = "h" int(rand() * n); out = ""
		for (c = 1; c <= length(name); c++) {
			ch = substr(name, c, 1)
			out = out (rand() < 0.5 ? toupper(ch) : ch)
		}
		print out "." z " A"
	}
}' >"$work/queries-distinct.txt"

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
	-subj "/CN=bench.test" -addext "subjectAltName=IP:127.0.0.1" \
	-keyout "$work/key.pem" -out "$work/cert.pem" >/dev/null 2>&1

# start SERVER: starts it pinned to SERVER_CPU on port, tls_port (0: no
# DNS over TLS) and waits until it answers.
start() {
	port=$(free_port 0)
	tls_port=$(free_port 5003)
	dir="$work/$1"
	mkdir -p "$dir"
	cp "$work/zone.db" "$dir/zone.db"
	case $1 in
	ztls)
		taskset -c "$SERVER_CPU" "$work/ztls-bin" dns serve --zone "$dir/zone.db" --listen "127.0.0.1:$port" \
			--tls "127.0.0.1:$tls_port" --cert "$work/cert.pem" --key "$work/key.pem" --rrl-rate 0 >"$dir/log" 2>&1 &
		;;
	bind)
		cat >"$dir/named.conf" <<CONF
tls bench { key-file "$work/key.pem"; cert-file "$work/cert.pem"; };
options {
  directory "$dir"; pid-file "$dir/named.pid"; session-keyfile "$dir/session.key";
  listen-on port $port { 127.0.0.1; }; listen-on port $tls_port tls bench { 127.0.0.1; };
  listen-on-v6 { none; }; recursion no; dnssec-validation no; notify no; allow-transfer { none; };
};
controls { };
logging { category default { null; }; };
zone "$zone" { type primary; file "zone.db"; };
CONF
		taskset -c "$SERVER_CPU" "$NAMED" -g -4 -n 1 -c "$dir/named.conf" >"$dir/log" 2>&1 &
		;;
	knot)
		tls_port=0
		cat >"$dir/knot.conf" <<CONF
server:
    rundir: "$dir"
    listen: 127.0.0.1@$port
    udp-workers: 1
    tcp-workers: 1
    background-workers: 1
database:
    storage: "$dir"
log:
  - target: stderr
    any: error
template:
  - id: default
    storage: "$dir"
zone:
  - domain: $zone
    file: zone.db
CONF
		taskset -c "$SERVER_CPU" "$KNOTD" -c "$dir/knot.conf" >"$dir/log" 2>&1 &
		;;
	nsd)
		cat >"$dir/nsd.conf" <<CONF
server:
    ip-address: 127.0.0.1@$port
    ip-address: 127.0.0.1@$tls_port
    port: $port
    server-count: 1
    username: ""
    chroot: ""
    zonesdir: "$dir"
    pidfile: "$dir/nsd.pid"
    database: ""
    xfrdfile: "$dir/xfrd.state"
    zonelistfile: "$dir/zone.list"
    logfile: "$dir/nsd.log"
    verbosity: 0
    rrl-ratelimit: 0
    tls-service-key: "$work/key.pem"
    tls-service-pem: "$work/cert.pem"
    tls-port: $tls_port
remote-control:
    control-enable: no
zone:
    name: $zone
    zonefile: zone.db
CONF
		taskset -c "$SERVER_CPU" "$NSD" -d -c "$dir/nsd.conf" >"$dir/log" 2>&1 &
		;;
	esac
	pid=$!
	n=0
	until [ -n "$(dig +short +time=1 +tries=1 -p "$port" @127.0.0.1 "h1.$zone" A 2>/dev/null)" ]; do
		n=$((n + 1))
		[ $n -lt 100 ] || { echo "bench-dns-auth-cpu: $1 did not start on port $port" >&2; cat "$dir/log" "$dir/nsd.log" 2>/dev/null >&2; exit 1; }
		sleep 0.1
	done
}

# tree_ticks: utime + stime of the server's process and its descendants.
tree_ticks() {
	pids=$pid
	frontier=$pid
	while [ -n "$frontier" ]; do
		next=""
		for p in $frontier; do
			for c in $(cat /proc/"$p"/task/*/children 2>/dev/null); do
				next="$next $c"
			done
		done
		pids="$pids $next"
		frontier=$next
	done
	for p in $pids; do
		# Fields after the command name, which may hold spaces: utime is
		# the 12th, stime the 13th after the ") ".
		sed 's/.*) //' /proc/"$p"/stat 2>/dev/null | awk '{ print $12 + $13 }'
	done | awk '{ s += $1 } END { print s + 0 }'
}

# run SERVER MODE MIX ROUND: one dnsperf run; prints "qps queries cpu_s".
run() {
	p=$port
	[ "$2" = dot ] && p=$tls_port
	clients=$TCP_CLIENTS
	[ "$2" = udp ] && clients=$UDP_CLIENTS
	lock=""
	[ -n "$BENCH_LOCK" ] && lock="flock $BENCH_LOCK"
	before=$(tree_ticks)
	# shellcheck disable=SC2086
	$lock taskset -c "$client_cpus" dnsperf -s 127.0.0.1 -p "$p" -m "$2" -d "$work/queries-$3.txt" -l "$DURATION" \
		-c "$clients" -T "$client_threads" -q "$OUTSTANDING" -t 2 >"$work/out" 2>&1 || true
	after=$(tree_ticks)
	[ -n "${RAW_DIR:-}" ] && cp "$work/out" "$RAW_DIR/$1-$2-$3-round$4.txt"
	awk -v t0="$before" -v t1="$after" -v tck="$tck" '
		/Queries completed:/ { q = $3 }
		/Queries per second:/ { qps = $4 }
		END { printf "%s %s %.3f\n", qps + 0, q + 0, (t1 - t0) / tck }' "$work/out"
}

median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

[ -n "${RAW_DIR:-}" ] && mkdir -p "$RAW_DIR"
cpu=$(awk -F: '/model name/ { sub(/^ /, "", $2); print $2; exit }' /proc/cpuinfo)
versions="$("$work/ztls-bin" --version 2>/dev/null | head -1)"
[ -n "$NAMED" ] && versions="$versions, $("$NAMED" -v)"
[ -n "$KNOTD" ] && versions="$versions, $("$KNOTD" --version 2>&1 | head -1)"
[ -n "$NSD" ] && versions="$versions, $("$NSD" -v 2>&1 | head -1)"
echo "bench-dns-auth-cpu: $ncpu CPUs ($cpu); servers on CPU $SERVER_CPU, dnsperf on $client_cpus; $DURATION s x $ROUNDS rounds, alternated; $versions" >&2

# One server runs at a time; a round runs every server once per cell, so
# background load hits all alike. Results: cell server qps q/cpu-s.
for mix in $MIXES; do
	for mode in $MODES; do
		r=0
		while [ $r -lt "$ROUNDS" ]; do
			for s in $SERVERS; do
				start "$s"
				if [ "$mode" = dot ] && [ "$tls_port" = 0 ]; then
					stop_server
					continue
				fi
				set -- $(run "$s" "$mode" "$mix" "$r")
				stop_server
				echo "$s $1 $2 $3" >>"$work/$mix.$mode.$s"
				echo "bench-dns-auth-cpu: $mix $mode round $r $s: $1 qps, $2 queries, $3 CPU-s" >&2
			done
			r=$((r + 1))
		done
	done
done

cell() { # cell MIX MODE SERVER -> "qps perCPUs" medians, or "n/a n/a"
	f="$work/$1.$2.$3"
	if [ ! -s "$f" ]; then
		echo "n/a n/a"
		return
	fi
	q=$(awk '{ print $2 }' "$f" | median)
	c=$(awk '{ print ($4 > 0 ? $3 / $4 : 0) }' "$f" | median)
	echo "$q $c"
}

num() { awk -v v="$1" 'BEGIN { if (v == "n/a") print v; else printf "%.0f", v }'; }

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "n/a" || b == "n/a" || b == 0) print "n/a"; else printf "%.2f", a / b }'; }

for mix in $MIXES; do
	echo
	echo "Query mix: $mix (queries per second; queries per server CPU-second)"
	echo
	head="| transport |"
	rule="|---|"
	for s in $SERVERS; do head="$head $s qps | $s q/CPU-s |"; rule="$rule---:|---:|"; done
	for s in $SERVERS; do [ "$s" = ztls ] || { head="$head ztls / $s (CPU) |"; rule="$rule---:|"; }; done
	echo "$head"
	echo "$rule"
	for mode in $MODES; do
		line="| $mode |"
		for s in $SERVERS; do
			set -- $(cell "$mix" "$mode" "$s")
			line="$line $(num "$1") | $(num "$2") |"
		done
		set -- $(cell "$mix" "$mode" ztls)
		zc=$2
		for s in $SERVERS; do
			[ "$s" = ztls ] && continue
			set -- $(cell "$mix" "$mode" "$s")
			line="$line $(ratio "$zc" "$2") |"
		done
		echo "$line"
	done
done
