#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""memcount.py PID NEEDLE - how many times NEEDLE occurs in the readable memory of process PID.

What the key tests use to show that a key is gone from a process (root reads
/proc/PID/mem of any process, dumpable or not)."""
import re
import sys

pid, needle = sys.argv[1], sys.argv[2].encode()
n = 0
with open("/proc/%s/maps" % pid) as maps, open("/proc/%s/mem" % pid, "rb", 0) as mem:
    for line in maps:
        m = re.match(r"([0-9a-f]+)-([0-9a-f]+) (r)", line)
        if not m:
            continue
        lo, hi = int(m.group(1), 16), int(m.group(2), 16)
        try:
            mem.seek(lo)
            n += mem.read(hi - lo).count(needle)
        except (OSError, ValueError, OverflowError):
            pass
print(n)
