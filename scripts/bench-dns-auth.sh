#!/bin/sh
# bench-dns-auth.sh: queries per second of ztls's authoritative server
# ("ztls dns serve") against BIND 9 on the same zone, over UDP and TCP,
# measured with dnsperf on loopback. Prints a Markdown table with the
# ratio ztls / BIND.
#
# Usage: scripts/bench-dns-auth.sh        (from the repository root)
# Environment:
#   DURATION   seconds per dnsperf run (default 10)
#   ROUNDS     runs per server and transport; the median is reported (default 3)
#   NAMES      names in the generated zone (default 1000)
#   UDP_CLIENTS, TCP_CLIENTS   dnsperf -c for each transport (default 8, 16)
#   OUTSTANDING               dnsperf -q (default 200)
#   THREADS    named -n and dnsperf -T (default: number of CPUs)
set -eu

DURATION=${DURATION:-10}
ROUNDS=${ROUNDS:-3}
NAMES=${NAMES:-1000}
UDP_CLIENTS=${UDP_CLIENTS:-8}
TCP_CLIENTS=${TCP_CLIENTS:-16}
OUTSTANDING=${OUTSTANDING:-200}
THREADS=${THREADS:-$(nproc)}
GO=${GO:-go}

for bin in dnsperf named; do
	command -v $bin >/dev/null 2>&1 || [ -x /usr/sbin/$bin ] || {
		echo "bench-dns-auth: $bin not found (make deps)" >&2; exit 1; }
done
NAMED=$(command -v named || echo /usr/sbin/named)

work=$(mktemp -d /tmp/bench-dns-auth.XXXXXX)
named_pid=""
ztls_pid=""
cleanup() {
	[ -n "$named_pid" ] && kill "$named_pid" 2>/dev/null && wait "$named_pid" 2>/dev/null || true
	[ -n "$ztls_pid" ] && kill "$ztls_pid" 2>/dev/null && wait "$ztls_pid" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT INT TERM

echo "bench-dns-auth: building ztls" >&2
$GO build -o "$work/ztls" ./cmd/ztls

# free_port OFFSET: a free loopback port for UDP and TCP; distinct offsets
# give distinct ports within the same second.
free_port() {
	while :; do
		p=$(awk -v off="$1" 'BEGIN { srand(); print 20000 + (int(rand() * 40000) + off) % 40000 }')
		if [ -z "$(ss -Hln "( sport = :$p )" 2>/dev/null)" ]; then
			echo "$p"
			return
		fi
		sleep 1 # srand() seeds from the clock's seconds
	done
}

# The zone: NAMES hosts with A, AAAA and a Z-data TXT; the query mix asks
# for them, plus NODATA and NXDOMAIN answers.
zone=bench.test.
{
	echo "\$ORIGIN $zone"
	echo "\$TTL 3600"
	echo "@ IN SOA ns hostmaster 1 3600 600 86400 300"
	echo "@ IN NS ns"
	echo "ns IN A 127.0.0.1"
	i=0
	while [ $i -lt "$NAMES" ]; do
		echo "h$i IN A 192.0.2.$((i % 250 + 1))"
		echo "h$i IN AAAA 2001:db8::$i"
		echo "_ztls._443._tcp.h$i IN TXT \"v=ztls1 id=$i\""
		i=$((i + 1))
	done
} >"$work/zone.db"
awk -v n="$NAMES" -v z="$zone" 'BEGIN {
	srand(1)
	for (k = 0; k < 20000; k++) {
		i = int(rand() * n); r = rand()
		if (r < 0.4) print "h" i "." z " A"
		else if (r < 0.6) print "h" i "." z " AAAA"
		else if (r < 0.8) print "_ztls._443._tcp.h" i "." z " TXT"
		else if (r < 0.9) print "h" i "." z " MX"
		else print "missing" i "." z " A"
	}
}' >"$work/queries.txt"

bind_port=$(free_port 0)
cat >"$work/named.conf" <<CONF
options {
  directory "$work";
  pid-file "$work/named.pid";
  session-keyfile "$work/session.key";
  listen-on port $bind_port { 127.0.0.1; };
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
"$NAMED" -g -4 -n "$THREADS" -c "$work/named.conf" >"$work/named.log" 2>&1 &
named_pid=$!

ztls_port=$(free_port 7919)
"$work/ztls" dns serve --zone "$work/zone.db" --listen "127.0.0.1:$ztls_port" >"$work/ztls.log" 2>&1 &
ztls_pid=$!

# Wait until both answer.
for port in $bind_port $ztls_port; do
	n=0
	until dig +short +time=1 +tries=1 -p "$port" @127.0.0.1 "h1.$zone" A >/dev/null 2>&1 &&
		[ -n "$(dig +short +time=1 +tries=1 -p "$port" @127.0.0.1 "h1.$zone" A)" ]; do
		n=$((n + 1))
		[ $n -lt 100 ] || { echo "bench-dns-auth: server on port $port did not start" >&2;
			cat "$work/named.log" "$work/ztls.log" >&2; exit 1; }
		sleep 0.1
	done
done

# run PORT MODE CLIENTS: one dnsperf run, prints its queries per second.
run() {
	dnsperf -s 127.0.0.1 -p "$1" -m "$2" -d "$work/queries.txt" -l "$DURATION" \
		-c "$3" -T "$THREADS" -q "$OUTSTANDING" -t 2 2>&1 |
		awk '/Queries per second:/ { print $4 } /Queries lost:/ { lost = $3 } END { if (lost + 0 > 0) print "lost " lost > "/dev/stderr" }'
}

median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

cpu=$(awk -F: '/model name/ { sub(/^ /, "", $2); print $2; exit }' /proc/cpuinfo)
echo "bench-dns-auth: $(nproc) CPUs ($cpu), $DURATION s x $ROUNDS rounds per cell" >&2

results=""
for mode in udp tcp; do
	clients=$UDP_CLIENTS
	[ "$mode" = tcp ] && clients=$TCP_CLIENTS
	: >"$work/bind.$mode"
	: >"$work/ztls.$mode"
	r=0
	while [ $r -lt "$ROUNDS" ]; do
		# Alternate, so background load hits both alike.
		run "$bind_port" "$mode" "$clients" >>"$work/bind.$mode"
		run "$ztls_port" "$mode" "$clients" >>"$work/ztls.$mode"
		r=$((r + 1))
	done
	b=$(median <"$work/bind.$mode")
	z=$(median <"$work/ztls.$mode")
	echo "bench-dns-auth: $mode bind $(tr '\n' ' ' <"$work/bind.$mode")/ ztls $(tr '\n' ' ' <"$work/ztls.$mode")" >&2
	results="$results$mode $b $z
"
done

echo "| transport | BIND 9 qps | ztls qps | ztls / BIND |"
echo "|---|---:|---:|---:|"
printf '%s' "$results" | while read -r mode b z; do
	awk -v m="$mode" -v b="$b" -v z="$z" 'BEGIN { printf "| %s | %.0f | %.0f | %.2f |\n", m, b, z, z / b }'
done
