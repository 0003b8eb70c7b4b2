import sys, statistics as st
lines=[l.split() for l in open(sys.argv[1]) if l.startswith('TL ')]
visits=[];cur=None
for _,pid,name,t in lines:
    t=int(t)
    if name.startswith('c.race_start'): name='c.race_start'
    if name=='c.click':
        cur={}; visits.append(cur); cur[name]=t
    elif cur is not None and name not in cur:
        cur[name]=t
segs=[('click->hello built','c.click','c.hello'),('hello->udp written','c.hello','c.race_start'),
('udp written->server dgram in (one-way)','c.race_start','s.dgram_in'),
('server dgram in->flight start','s.dgram_in','s.flight_start'),
('server flight compute','s.flight_start','s.flight_computed'),
('server fragment+send','s.flight_computed','s.flight_sent'),
('server sent->client flight read (one-way)','s.flight_sent','c.flight_read'),
('client: flight read->race done','c.flight_read','c.race_done'),
('client: process flight','c.race_done','c.fed'),
('client: Finished written, handshake done','c.fed','c.hs_done'),
('client: handshake done->first byte','c.hs_done','c.first_byte'),
('total click->first byte','c.click','c.first_byte'),
('(tcp connected, from click)','c.click','c.tcp_connected')]
rtt=float(sys.argv[2])
for name,a,b in segs:
    v=[(x[b]-x[a])/1e3 for x in visits if a in x and b in x]
    print(f"{name:45s} median {st.median(v):9.0f} µs  (min {min(v):.0f}, max {max(v):.0f}, n={len(v)})")
tot=st.median([(x['c.first_byte']-x['c.click'])/1e3 for x in visits])
print(f"excess over {rtt} ms: {tot-rtt*1000:.0f} µs = {100*(tot/1000-rtt)/rtt:.2f} %")
