/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * verify.h - `latch verify`'s attack battery: crafted frames from the
 * sandbox's own guest, each attack beside a control, judged by the kernel.
 *
 * The battery is built from what the kernel holds for the sandbox (its
 * config and policy), never from a file: the guest's MAC and addresses, the
 * host address, its ports and the resolver.  Each case is one Ethernet
 * frame as the guest would put it on the wire.  Offline, a frame goes
 * through the sandbox's pinned from-guest program with BPF_PROG_TEST_RUN, as
 * if it arrived on the sandbox's device (its routes and forwarding count,
 * as they do live); the cli runs the same frames from inside a VM guest.
 * Either way the verdict is read back: the program's return value and the
 * counter of the reason it counted.
 *
 * Side effects, by design visible: the runs are counted in the sandbox's
 * counters, denies are reported as events (and reach the audit log through
 * latchd), controls to the resolver take DNS tokens, and a passing control
 * records a flow.
 */
#ifndef LATCH_LOADER_VERIFY_H
#define LATCH_LOADER_VERIFY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "loader/sandbox.h"

#define LATCH_VERIFY_FRAME_MAX 192
#define LATCH_VERIFY_MAX 32

struct latch_verify_case {
	char name[64]; /* "spoofed source MAC" */
	bool attack; /* false: the control of the attack before it */
	bool policy_bound; /* an attack only the policy stops: under `open` it passes, uncontained */
	int want; /* the reason the kernel should count */
	uint16_t l4_off; /* a plain TCP or UDP frame: where its header starts; 0 for any other */
	uint8_t l4_proto; /* and which: 6 or 17 */
	size_t len;
	uint8_t frame[LATCH_VERIFY_FRAME_MAX];
};

/*
 * What the kernel did with one frame: the verdict (offline only; -1 when
 * unknown) and the reasons whose from-guest counters grew, in counter order.
 */
struct latch_verify_seen {
	int verdict; /* TC_ACT_OK 0, TC_ACT_SHOT 2, or -1 */
	int n;
	int reason[4];
	bool noisy; /* not exactly one packet in one reason: other traffic shared the window */
};

enum latch_verify_result {
	LATCH_VERIFY_OK, /* attack stopped / control passed, as expected */
	LATCH_VERIFY_LEAK, /* an attack passed: a real leak */
	LATCH_VERIFY_UNCONTAINED, /* a policy-bound attack passed under `open` */
	LATCH_VERIFY_CONTROL_FAIL, /* a control did not pass: the attack beside it proves nothing */
	LATCH_VERIFY_UNSEEN, /* no counter moved: the frame was not seen */
	LATCH_VERIFY_NOT_TRIED, /* could not be tried here (a name row without latchd): no verdict either way */
};

/*
 * Build the battery for an open sandbox into out[] (attack after its
 * control); returns the count, or -errno with a line in err.  Cases the
 * sandbox can't have (IPv6 without a v6 address...) are left out.
 */
int latch_verify_battery(const struct latch_sandbox *sb, struct latch_verify_case *out, int max, char *err,
			 size_t errlen);
/* Run one case through the pinned from-guest program, on the sandbox's device. */
int latch_verify_testrun(const struct latch_sandbox *sb, const struct latch_verify_case *c,
			 struct latch_verify_seen *seen);
/*
 * The from-guest reasons whose counters differ between two snapshots (and
 * whether that was one packet).  With c, the reasons c's frame can't be
 * counted under are left out: a guest's own ARP and neighbour discovery
 * keep running beside an IPv4 frame (ND reasons: only an IPv6 frame; ARP
 * reasons: only an ARP frame).
 */
/*
 * Give a plain TCP or UDP frame a new source port (its checksum kept
 * right): each try of a frame from the guest is then a flow of its own, which
 * no flow entry of an earlier try can pass.  Nothing for other frames.
 */
void latch_verify_sport(struct latch_verify_case *c, uint16_t sport);
void latch_verify_diff(const struct latch_counter *before, const struct latch_counter *after,
		       const struct latch_verify_case *c, struct latch_verify_seen *seen);
/* Judge what was seen against what the case wants; open: the sandbox runs `open`. */
enum latch_verify_result latch_verify_judge(const struct latch_verify_case *c, const struct latch_verify_seen *seen,
					    bool open);
const char *latch_verify_result_name(enum latch_verify_result r);

#endif
