#!/usr/bin/env python3
# cap.py: log TCP packets on tun0 to/from port 853 with kernel timestamps (run inside a netns).
import socket, struct, sys, time
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.ntohs(3))
s.bind(('tun0', 0))
s.setsockopt(socket.SOL_SOCKET, 35, 1)  # SO_TIMESTAMPNS
end = time.time() + float(sys.argv[1])
s.settimeout(1)
out = open(sys.argv[2], 'w')
while time.time() < end:
    try:
        data, anc, _, _ = s.recvmsg(65535, 1024)
    except socket.timeout:
        continue
    ts = None
    for lvl, typ, d in anc:
        if typ == 35:
            sec, ns = struct.unpack('qq', d[:16]); ts = sec + ns / 1e9
    if len(data) < 40 or data[0] >> 4 != 4 or data[9] != 6: continue
    ihl = (data[0] & 15) * 4
    tot = struct.unpack('!H', data[2:4])[0]
    sp, dp, seq, ack = struct.unpack('!HHII', data[ihl:ihl+12])
    off = (data[ihl+12] >> 4) * 4
    flags = data[ihl+13]
    if 853 not in (sp, dp): continue
    out.write('%.6f %s:%d > %s:%d len %d flags %02x seq %d ack %d\n' % (ts, socket.inet_ntoa(data[12:16]), sp, socket.inet_ntoa(data[16:20]), dp, tot - ihl - off, flags, seq, ack))
    out.flush()
