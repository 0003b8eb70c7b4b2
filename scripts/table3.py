#!/usr/bin/env python3
"""Print docs/testbed.md's Table 3 and its checks from a `ztls bench --json` file.

Usage: scripts/table3.py docs/testbed/results.json

"RTT" is the configured round trip; "measured" is the emulator's own check in the
same run (median TCP connect time between the hosts), the round trip a packet
exchange really costs on the testbed.
"""
import json
import sys

d = json.load(open(sys.argv[1]))
by = {(r["scenario"], r["rtt_ms"], r["protocol"]): r for r in d["results"]}
measured = {c["rtt_ms"]: c["tcp_connect_median_ms"] for c in d.get("emulator_checks", [])}
protos = [p for p in ["tls", "ztls", "gotls", "openssl", "tls-0rtt", "quic", "quic-0rtt", "turbo", "ztls-turbo"]
          if any(k[2] == p for k in by)]
scens = [s for s in ["stub", "local-warm", "public-cold", "local-cold", "public-warm"] if any(k[0] == s for k in by)]
rtts = sorted({k[1] for k in by})


def med(s, rtt, p):
    r = by.get((s, rtt, p))
    return None if r is None or not r["runs"] else r["first_byte_ms"]["median"]


def cell(x, bold=False):
    if x is None:
        return "–"
    return ("**%.2f**" if bold else "%.2f") % x


print("| scenario | RTT | " + " | ".join(protos) + " |")
print("|---|---:|" + "---:|" * len(protos))
for s in scens:
    for rtt in rtts:
        print("| %s | %s | " % (s, rtt) + " | ".join(cell(med(s, rtt, p), p == "ztls") for p in protos) + " |")
print()
print("| scenario | RTT (measured) | tls − ztls | in RTT (measured) | off 1 RTT | ztls − quic | turbo saves | ztls-turbo saves |")
print("|---|---:|---:|---:|---:|---:|---:|---:|")
worst = {}
for s in scens:
    for rtt in rtts:
        t, z, q = med(s, rtt, "tls"), med(s, rtt, "ztls"), med(s, rtt, "quic")
        m = measured.get(rtt, rtt)
        saved = t - z
        row = "| %s | %s (%.3f) | %.2f | %.3f (%.3f) | %.2f %% (%.2f %%) | %s |" % (
            s, rtt, m, saved, saved / rtt, saved / m, abs(saved / rtt - 1) * 100, abs(saved / m - 1) * 100,
            "–" if q is None else "%+.2f" % (z - q))
        for p, n in (("turbo", 1), ("ztls-turbo", 2)):
            x = med(s, rtt, p)
            if x is None:
                row += " – |"
                continue
            sv = t - x
            row += " %.3f (%.3f) RTT |" % (sv / rtt, sv / m)
            worst.setdefault(p, []).append((abs(sv / rtt - n) * 100, abs(sv / m - n) * 100, s, rtt))
        worst.setdefault("ztls", []).append((abs(saved / rtt - 1) * 100, abs(saved / m - 1) * 100, s, rtt))
        print(row)
print()
for p, v in worst.items():
    bad = [(a, b, s, r) for a, b, s, r in v if a > 2]
    print("%s: off the expected saving by more than 2 %% of the configured RTT in %d of %d cells %s" % (
        p, len(bad), len(v), ", ".join("%s %.1f (%.2f %% / measured %.2f %%)" % (s, r, a, b) for a, b, s, r in bad)))
