#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""free_net.py CIDR...: print the first candidate IPv4 network that overlaps no
route (any table) and no address on this host, or nothing.

The VM tests, the VM demo and the benchmarks pick their sandbox pool with it:
`latch up` refuses a pool that overlaps the host's routes, and a test must
never take a network the host really uses (here eth0 sits in 192.0.2.0/24)."""
import ipaddress
import json
import subprocess
import sys

used = []
for cmd in (["ip", "-j", "route", "show", "table", "all"], ["ip", "-j", "addr", "show"]):
    out = subprocess.run(cmd, capture_output=True, text=True).stdout or "[]"
    for r in json.loads(out):
        nets = [r.get("dst")] + [a.get("local") + "/" + str(a.get("prefixlen"))
                                 for a in r.get("addr_info", []) if a.get("family") == "inet"]
        for d in nets:
            if d and d != "default" and ":" not in d:
                try:
                    used.append(ipaddress.ip_network(d, strict=False))
                except ValueError:
                    pass
for c in sys.argv[1:]:
    if not any(ipaddress.ip_network(c).overlaps(u) for u in used):
        print(c)
        break
