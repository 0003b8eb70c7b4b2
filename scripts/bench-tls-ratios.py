#!/usr/bin/env python3
"""Per-round ratios of a `make bench-rustls` output (issue 32's measure).

Usage: python3 scripts/bench-tls-ratios.py RUN.txt [RUN.txt ...]
       where RUN.txt is the whole output of `BENCH='Handshake$|Handshake/' COUNT=5 make bench-rustls`.

Each round runs ztls's Go benchmarks and then rustls back to back; for each
group and side this prints the median over the rounds of rustls's working
time divided by ztls's (above 1: ztls is faster), the range, and the two
medians in microseconds.
"""
import re,statistics,sys
for f in sys.argv[1:]:
    rounds=[];cur={}
    for l in open(f):
        if l.startswith('# round'):
            if cur: rounds.append(cur)
            cur={}
        m=re.match(r'BenchmarkHandshake/(\S+?)/(ztls|rustls)-\d+\s+\d+\s+\d+ ns/op\s+(\d+) client-ns/op\s+(\d+) server-ns/op',l)
        if m: cur[(m[1],m[2])]=(int(m[3]),int(m[4]))
    if cur: rounds.append(cur)
    out=[]
    for g in ['x25519-ecdsa-aes128','x25519mlkem768-ecdsa-aes128']:
        for side,i in [('client',0),('server',1)]:
            rs=[r[(g,'rustls')][i]/r[(g,'ztls')][i] for r in rounds]
            zt=statistics.median(r[(g,'ztls')][i] for r in rounds)/1000; ru=statistics.median(r[(g,'rustls')][i] for r in rounds)/1000
            out.append(f"{g.split('-')[0]} {side}: {statistics.median(rs):.2f} ({min(rs):.2f}-{max(rs):.2f}) ztls {zt:.1f} rustls {ru:.1f}")
    print(f, len(rounds)); print('\n'.join('  '+o for o in out))
