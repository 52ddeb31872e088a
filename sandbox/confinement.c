// SPDX-License-Identifier: GPL-2.0-only
/*
 * confinement.c - latchd's confinement as the kernel shows it, for `latch
 * status` and `latch doctor`: latchd's own word for its pid, checked
 * against the processes in its cgroup and the programs attached there.
 */
#include <stdio.h>

#include "ctl/ctl.h"
#include "sandbox/sandbox.h"

json_t *latch_confinement_report(char *line, size_t len, int *level)
{
	struct latch_cg_latchd c;
	char err[LATCH_ERR_MAX], hooks[128] = "";
	json_t *ping = latchd_ping(2000), *j, *counters = json_object();
	long long pid = ping ? json_integer_value(json_object_get(ping, "pid")) : 0;
	bool pid_in = false;
	uint64_t refused = 0;
	size_t hl = 0;

	json_decref(ping);
	if (latch_cg_latchd_observe(&c, err, sizeof(err)))
		snprintf(c.why, sizeof(c.why), "%.190s", err);
	for (int i = 0; i < c.n_pids && i < 8; i++)
		pid_in = pid_in || c.pids[i] == pid;
	for (int i = 0; i < LATCH_CG_HOOK_COUNT; i++)
		if (c.posture.hook[i].in_effective && hl < sizeof(hooks))
			hl += snprintf(hooks + hl, sizeof(hooks) - hl, "%s%s", hl ? "," : "", latch_cg_hook_names[i]);
	for (int r = LATCH_DROP_LAST; r <= LATCH_DROP_MALFORMED; r++)
		for (int k = 0; k < LATCH_DIR_COUNT; k++) {
			uint64_t n = c.counters[latch_counter_slot(r, k)].packets;

			refused += n;
			if (n)
				json_object_set_new(counters, latch_reason_name(r), json_integer(n));
		}
	if (!pid) {
		*level = 1;
		if (!c.exists)
			snprintf(line, len, "latchd is not running");
		else if (!c.n_pids)
			snprintf(line, len, "latchd is not running (its cgroup %s is there, empty)", c.dir);
		else
			snprintf(line, len,
				 "latchd does not answer on its socket, and its cgroup %s holds %d process(es)", c.dir,
				 c.n_pids);
	} else if (!pid_in) {
		*level = 2;
		snprintf(line, len, "latchd (pid %lld) is NOT confined: it is not in %s%s%s", pid, c.dir,
			 *c.why ? "; " : "", c.why);
	} else if (!c.confined) {
		*level = 2;
		snprintf(line, len, "latchd (pid %lld) is in %s, NOT VERIFIED: %s", pid, c.dir, c.why);
	} else {
		*level = 0;
		snprintf(line, len,
			 "latchd (pid %lld) confined in %s: %s and the room gate attached and running, "
			 "%d entries, %llu refused",
			 pid, c.dir, hooks, c.entries, (unsigned long long)refused);
	}
	j = json_pack("{s:b, s:o, s:s, s:b, s:s, s:b, s:i, s:I, s:I, s:o, s:o}", "confined", *level == 0, "pid",
		      pid ? json_integer(pid) : json_null(), "cgroup", c.dir, "pid_in_cgroup", pid_in, "hooks", hooks,
		      "gate", c.gate, "entries", c.entries, "refused", (json_int_t)refused, "gate_dropped",
		      (json_int_t)c.gate_dropped, "counters", counters, "why",
		      *level ? json_string(line) : json_null());
	return j;
}
