# dns-bench-lib.sh: what scripts/bench-dns-auth.sh and
# scripts/bench-dns-auth-cpu.sh share, sourced by both (POSIX sh).

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

# bench_zone ZONE NAMES: the benchmark zone on stdout: NAMES hosts with A,
# AAAA and a Z-data TXT.
bench_zone() {
	echo "\$ORIGIN $1"
	echo "\$TTL 3600"
	echo "@ IN SOA ns hostmaster 1 3600 600 86400 300"
	echo "@ IN NS ns"
	echo "ns IN A 127.0.0.1"
	i=0
	while [ $i -lt "$2" ]; do
		echo "h$i IN A 192.0.2.$((i % 250 + 1))"
		echo "h$i IN AAAA 2001:db8::$i"
		echo "_ztls._443._tcp.h$i IN TXT \"v=ztls1 id=$i\""
		i=$((i + 1))
	done
}

# standard_queries ZONE NAMES: the standard query mix on stdout (20 000
# questions over the zone's names: answers, NODATA and NXDOMAIN).
standard_queries() {
	awk -v n="$2" -v z="$1" 'BEGIN {
		srand(1)
		for (k = 0; k < 20000; k++) {
			i = int(rand() * n); r = rand()
			if (r < 0.4) print "h" i "." z " A"
			else if (r < 0.6) print "h" i "." z " AAAA"
			else if (r < 0.8) print "_ztls._443._tcp.h" i "." z " TXT"
			else if (r < 0.9) print "h" i "." z " MX"
			else print "missing" i "." z " A"
		}
	}'
}
