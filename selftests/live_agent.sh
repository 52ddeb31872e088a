#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
# live_agent.sh - the guest agent's protocol in seconds, without a guest:
# build/vm/latch-agent runs on this host with a raw pty for its port, and
# build/selftests/agent_selftest --local drives it through vm/agent_client.c
# (plain runs, limits, cancels, stdin and its backpressure, the pty, window
# sizes, ^C and forwarded signals, the working directory, a junk stream).
# The pty in place of virtio-serial is the one stand-in; the agent, the
# commands it runs (harmless ones: cat, wc, stty, sleep) and the client are
# real.  The program prints KTAP and removes its agent, relay and temp dir.
# shellcheck source=selftests/lib.sh
. "$(dirname "$0")/lib.sh"

[ "$(id -u)" = 0 ] || lts_skip_all "needs root"
for f in "$LTS_TOP/build/selftests/agent_selftest" "$LTS_TOP/build/vm/latch-agent"; do
	[ -x "$f" ] || lts_skip_all "no $f; run make selftest-bins"
done
command -v pgrep >/dev/null && command -v stty >/dev/null || lts_skip_all "needs pgrep and stty"
exec "$LTS_TOP/build/selftests/agent_selftest" --local "$LTS_TOP/build/vm/latch-agent"
