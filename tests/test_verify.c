// SPDX-License-Identifier: GPL-2.0-only
/*
 * test_verify.c - verify's frames from the guest: a new source port per
 * try keeps the L4 checksum right, and the guest's own answers to what a
 * frame brought back (an ICMP error, a RST) don't make a control's window
 * noisy, while an attack's window keeps every pass reason.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "loader/loader.h"

/* The checksum written again here on purpose: the test's oracle must not be the code it checks. */
static uint32_t sum16(const uint8_t *p, size_t n, uint32_t s)
{
	for (size_t i = 0; i + 1 < n; i += 2)
		s += (uint32_t)p[i] << 8 | p[i + 1];
	if (n & 1)
		s += (uint32_t)p[n - 1] << 8;
	return s;
}

/* The L4 checksum over the IPv4 pseudo header and the segment: 0 when the segment is right. */
static uint16_t check4(const uint8_t *f, size_t l4, size_t len, uint8_t proto)
{
	uint8_t ph[12] = { 0 };
	uint32_t s;

	memcpy(ph, f + 14 + 12, 8);
	ph[9] = proto;
	ph[10] = (len - l4) >> 8;
	ph[11] = (len - l4) & 0xff;
	s = sum16(f + l4, len - l4, sum16(ph, 12, 0));
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return ~s & 0xffff;
}

/* An IPv4 frame 192.0.2.2 -> 192.0.2.1 of proto with a 20-byte L4 part whose checksum is made right. */
static void frame4(struct latch_verify_case *c, uint8_t proto)
{
	uint8_t *ip = c->frame + 14, *l4 = c->frame + 34;
	int ck = proto == 6 ? 16 : 6;
	uint16_t v;

	memset(c, 0, sizeof(*c));
	c->frame[12] = 0x08;
	ip[0] = 0x45;
	ip[9] = proto;
	memcpy(ip + 12, (uint8_t[]){ 192, 0, 2, 2, 192, 0, 2, 1 }, 8);
	l4[0] = 40123 >> 8;
	l4[1] = 40123 & 0xff;
	l4[3] = 53;
	if (proto == 17)
		l4[5] = 20;
	else
		l4[13] = 0x02;
	c->len = 54;
	c->l4_off = 34;
	c->l4_proto = proto;
	v = check4(c->frame, 34, c->len, proto);
	l4[ck] = v >> 8;
	l4[ck + 1] = v & 0xff;
}

Test(verify, a_new_source_port_keeps_the_checksum_right)
{
	static const uint8_t proto[] = { 6, 17 };
	struct latch_verify_case c;

	for (int p = 0; p < 2; p++)
		for (uint32_t port = 32768; port < 65536; port += 977) {
			frame4(&c, proto[p]);
			cr_assert_eq(check4(c.frame, 34, c.len, proto[p]), 0);
			latch_verify_sport(&c, port);
			cr_expect_eq(c.frame[34] << 8 | c.frame[35], port);
			cr_expect_eq(check4(c.frame, 34, c.len, proto[p]), 0, "proto %d port %u", proto[p], port);
		}
}

Test(verify, the_guests_own_answers_leave_a_controls_window_clean)
{
	static struct latch_counter before[LATCH_COUNTER_SLOTS], after[LATCH_COUNTER_SLOTS];
	struct latch_verify_seen seen;
	struct latch_verify_case c;

	frame4(&c, 6);
	/* the SYN to a host service, and the guest's RST to the SYN-ACK and an ICMP error beside it */
	after[latch_counter_slot(LATCH_PASS_HOST_SERVICE, LATCH_DIR_FROM_GUEST)].packets = 1;
	after[latch_counter_slot(LATCH_PASS_FLOW, LATCH_DIR_FROM_GUEST)].packets = 1;
	after[latch_counter_slot(LATCH_DROP_PROTO, LATCH_DIR_FROM_GUEST)].packets = 1;
	latch_verify_diff(before, after, &c, &seen);
	cr_expect(!seen.noisy);
	cr_expect_eq(seen.n, 1);
	cr_expect_eq(seen.reason[0], LATCH_PASS_HOST_SERVICE);

	/* an attack's window keeps pass_flow: a leak is never hidden */
	c.attack = true;
	latch_verify_diff(before, after, &c, &seen);
	cr_expect(seen.noisy);
	cr_expect_eq(seen.n, 2);
}
