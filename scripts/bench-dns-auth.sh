#!/bin/sh
# bench-dns-auth.sh: queries per second of ztls's authoritative server
# ("ztls dns serve") against BIND 9 on the same zone, over UDP, TCP and
# DNS over TLS, with the servers on 1 CPU and on 2 CPUs (taskset),
# measured with dnsperf on loopback. Prints a Markdown table with the
# ratio ztls / BIND for each cell.
#
# Usage: scripts/bench-dns-auth.sh        (from the repository root)
# Environment:
#   DURATION   seconds per dnsperf run (default 10)
#   ROUNDS     runs per server and cell; the median is reported (default 3)
#   NAMES      names in the generated zone (default 1000)
#   MODES      transports (default "udp tcp dot")
#   CPUSETS    server CPU sets, space separated (default "0 0-1"); with the
#              set "0" dnsperf runs on the other CPUs, otherwise unpinned
#   UDP_CLIENTS, TCP_CLIENTS   dnsperf -c for UDP and for TCP and DoT (default 8, 16)
#   OUTSTANDING               dnsperf -q (default 200)
#   RAW_DIR    if set, each dnsperf output is kept there
#   ZTLS_ARGS  extra arguments for ztls dns serve
#   BENCH_LOCK if set, a file each dnsperf run holds with flock, so no two
#              benchmarks on the machine overlap (default /tmp/bench.lock
#              when flock exists)
set -eu
# shellcheck source=scripts/dns-bench-lib.sh
. "$(dirname "$0")/dns-bench-lib.sh"

DURATION=${DURATION:-10}
ROUNDS=${ROUNDS:-3}
NAMES=${NAMES:-1000}
MODES=${MODES:-udp tcp dot}
CPUSETS=${CPUSETS:-0 0-1}
UDP_CLIENTS=${UDP_CLIENTS:-8}
TCP_CLIENTS=${TCP_CLIENTS:-16}
OUTSTANDING=${OUTSTANDING:-200}
ZTLS_ARGS=${ZTLS_ARGS:-}
GO=${GO:-go}
BENCH_LOCK=${BENCH_LOCK-/tmp/bench.lock}
command -v flock >/dev/null 2>&1 || BENCH_LOCK=""

for bin in dnsperf named openssl taskset; do
	command -v $bin >/dev/null 2>&1 || [ -x /usr/sbin/$bin ] || {
		echo "bench-dns-auth: $bin not found (make deps)" >&2; exit 1; }
done
NAMED=$(command -v named || echo /usr/sbin/named)
ncpu=$(nproc)

work=$(mktemp -d /tmp/bench-dns-auth.XXXXXX)
named_pid=""
ztls_pid=""
stop_servers() {
	[ -n "$named_pid" ] && kill "$named_pid" 2>/dev/null && wait "$named_pid" 2>/dev/null || true
	[ -n "$ztls_pid" ] && kill "$ztls_pid" 2>/dev/null && wait "$ztls_pid" 2>/dev/null || true
	named_pid=""
	ztls_pid=""
}
cleanup() {
	stop_servers
	rm -rf "$work"
}
trap cleanup EXIT INT TERM

echo "bench-dns-auth: building ztls" >&2
$GO build -o "$work/ztls" ./cmd/ztls

# The zone: NAMES hosts with A, AAAA and a Z-data TXT; the query mix asks
# for them, plus NODATA and NXDOMAIN answers.
zone=bench.test.
bench_zone "$zone" "$NAMES" >"$work/zone.db"
standard_queries "$zone" "$NAMES" >"$work/queries.txt"

# A P-256 certificate for DNS over TLS, the same for both servers.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
	-subj "/CN=bench.test" -addext "subjectAltName=IP:127.0.0.1" \
	-keyout "$work/key.pem" -out "$work/cert.pem" >/dev/null 2>&1

# start_servers CPUSET THREADS: BIND 9 and ztls, each under taskset.
start_servers() {
	bind_port=$(free_port 0)
	bind_tls=$(free_port 3001)
	cat >"$work/named.conf" <<CONF
tls bench { key-file "$work/key.pem"; cert-file "$work/cert.pem"; };
options {
  directory "$work";
  pid-file "$work/named.pid";
  session-keyfile "$work/session.key";
  listen-on port $bind_port { 127.0.0.1; };
  listen-on port $bind_tls tls bench { 127.0.0.1; };
  listen-on-v6 { none; };
  recursion no;
  dnssec-validation no;
  notify no;
  allow-transfer { none; };
};
controls { };
logging { category default { null; }; };
zone "$zone" { type primary; file "zone.db"; };
CONF
	taskset -c "$1" "$NAMED" -g -4 -n "$2" -c "$work/named.conf" >"$work/named.log" 2>&1 &
	named_pid=$!

	ztls_port=$(free_port 7919)
	ztls_tls=$(free_port 11003)
	# RRL off, as BIND runs here without rate-limit: dnsperf asks each
	# question hundreds of times a second from one address.
	# shellcheck disable=SC2086
	taskset -c "$1" "$work/ztls" dns serve --zone "$work/zone.db" --listen "127.0.0.1:$ztls_port" \
		--tls "127.0.0.1:$ztls_tls" --cert "$work/cert.pem" --key "$work/key.pem" \
		--rrl-rate 0 $ZTLS_ARGS >"$work/ztls.log" 2>&1 &
	ztls_pid=$!

	for port in $bind_port $ztls_port; do
		n=0
		until [ -n "$(dig +short +time=1 +tries=1 -p "$port" @127.0.0.1 "h1.$zone" A 2>/dev/null)" ]; do
			n=$((n + 1))
			[ $n -lt 100 ] || { echo "bench-dns-auth: server on port $port did not start" >&2;
				cat "$work/named.log" "$work/ztls.log" >&2; exit 1; }
			sleep 0.1
		done
	done
}

# run PORT MODE CLIENTS CLIENT_CPUS THREADS NAME: one dnsperf run, prints
# its queries per second.
run() {
	pin=""
	[ -n "$4" ] && pin="taskset -c $4"
	lock=""
	[ -n "$BENCH_LOCK" ] && lock="flock $BENCH_LOCK"
	# shellcheck disable=SC2086
	$lock $pin dnsperf -s 127.0.0.1 -p "$1" -m "$2" -d "$work/queries.txt" -l "$DURATION" \
		-c "$3" -T "$5" -q "$OUTSTANDING" -t 2 >"$work/out" 2>&1 || true
	[ -n "${RAW_DIR:-}" ] && cp "$work/out" "$RAW_DIR/$6.txt"
	awk '/Queries per second:/ { print $4 } /Queries lost:/ { lost = $3 } END { if (lost + 0 > 0) print "lost " lost > "/dev/stderr" }' "$work/out"
}

median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

[ -n "${RAW_DIR:-}" ] && mkdir -p "$RAW_DIR"
cpu=$(awk -F: '/model name/ { sub(/^ /, "", $2); print $2; exit }' /proc/cpuinfo)
echo "bench-dns-auth: $ncpu CPUs ($cpu), $DURATION s x $ROUNDS rounds per cell, $("$NAMED" -v), $(dnsperf -h 2>&1 | awk '/^Version/ { print "dnsperf " $2 }')" >&2

results=""
for set in $CPUSETS; do
	threads=$(taskset -c "$set" nproc)
	client_cpus=""
	client_threads=$ncpu
	if [ "$threads" -lt "$ncpu" ]; then
		# dnsperf on the CPUs the servers do not use.
		client_cpus=$(awk -v n="$ncpu" -v t="$threads" 'BEGIN { s = t; for (i = t + 1; i < n; i++) s = s "," i; print s }')
		client_threads=$((ncpu - threads))
	fi
	start_servers "$set" "$threads"
	for mode in $MODES; do
		clients=$TCP_CLIENTS
		[ "$mode" = udp ] && clients=$UDP_CLIENTS
		bport=$bind_port zport=$ztls_port
		[ "$mode" = dot ] && bport=$bind_tls zport=$ztls_tls
		: >"$work/bind.$mode"
		: >"$work/ztls.$mode"
		r=0
		while [ $r -lt "$ROUNDS" ]; do
			# Alternate, so background load hits both alike.
			run "$bport" "$mode" "$clients" "$client_cpus" "$client_threads" "bind-$mode-cpus$set-round$r" >>"$work/bind.$mode"
			run "$zport" "$mode" "$clients" "$client_cpus" "$client_threads" "ztls-$mode-cpus$set-round$r" >>"$work/ztls.$mode"
			r=$((r + 1))
		done
		b=$(median <"$work/bind.$mode")
		z=$(median <"$work/ztls.$mode")
		echo "bench-dns-auth: $mode server CPUs $set: bind $(tr '\n' ' ' <"$work/bind.$mode")/ ztls $(tr '\n' ' ' <"$work/ztls.$mode")" >&2
		results="$results$mode $threads $b $z
"
	done
	stop_servers
done

echo "| transport | server CPUs | BIND 9 qps | ztls qps | ztls / BIND |"
echo "|---|---:|---:|---:|---:|"
printf '%s' "$results" | while read -r mode threads b z; do
	awk -v m="$mode" -v t="$threads" -v b="$b" -v z="$z" 'BEGIN { printf "| %s | %s | %.0f | %.0f | %.2f |\n", m, t, b, z, (b > 0 ? z / b : 0) }'
done
