// SPDX-License-Identifier: GPL-2.0-only
/*
 * events.c - what latchd records: the audit helper every part writes
 * through, and each sandbox's kernel deny events (the ring buffer, read
 * through the loader's latch_events_* API) into the audit log.
 *
 * The audit log allows each (sandbox, kind) 120 entries a minute and counts
 * the rest (audit/audit.h).  Busy paths ask latchd_audit_wanted() first, so
 * an entry the limit would drop is never built.
 *
 * After an append, a one-shot timer anchors the log's head outside it when
 * the module's period since the last anchor is over (audit_anchor_due()), so
 * a root who SIGKILLs latchd and cuts the log's tail can take only the last
 * second's entries unnoticed, not those since a tick that may be up to a
 * second behind.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <event2/event.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "latchd/latchd.h"

static void audit_anchor_arm(struct latchd *ld);

static void audit_anchor_fire(evutil_socket_t fd, short what, void *arg)
{
	struct latchd *ld = arg;

	/* a failed anchor is retried by the one-second tick, never by a timer that fires at once again */
	if (audit_tick(ld->audit) == 0)
		audit_anchor_arm(ld);
}

/* Arm the deferred anchor for the entry just appended, unless it is armed already. */
static void audit_anchor_arm(struct latchd *ld)
{
	uint64_t in_ns;
	struct timeval tv;

	if (!ld->base || !audit_anchor_due(ld->audit, &in_ns))
		return;
	if (!ld->audit_anchor_ev) {
		ld->audit_anchor_ev = evtimer_new(ld->base, audit_anchor_fire, ld);
		if (!ld->audit_anchor_ev)
			return; /* the one-second tick anchors it, a second later at worst */
	}
	if (evtimer_pending(ld->audit_anchor_ev, NULL))
		return;
	in_ns += 1000000; /* 1 ms late rather than early: the module's clock is not libevent's */
	tv.tv_sec = in_ns / 1000000000ULL;
	tv.tv_usec = in_ns % 1000000000ULL / 1000;
	evtimer_add(ld->audit_anchor_ev, &tv);
}

void latchd_audit_stop(struct latchd *ld)
{
	if (ld->audit_anchor_ev)
		event_free(ld->audit_anchor_ev);
	ld->audit_anchor_ev = NULL;
}

void latchd_audit(struct latchd *ld, const char *sandbox, const char *kind, const char *decision, const char *reason,
		  json_t *fields)
{
	struct audit_entry e = { .sandbox = sandbox, .kind = kind, .decision = decision, .reason = reason };
	char *text = NULL;
	int rc;

	if (!ld->audit) {
		json_decref(fields);
		return;
	}
	if (fields)
		text = json_dumps(fields, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(fields);
	e.fields = text;
	rc = audit_append(ld->audit, &e);
	if (rc && rc != -EAGAIN)
		latchd_log("audit log: %s (%s %s %s not recorded)", audit_error(ld->audit), sandbox, kind, decision);
	if (!rc)
		audit_anchor_arm(ld);
	free(text);
}

void latchd_audit_dns_refused(struct latchd *ld, const char *who, const char *qname, uint16_t qtype, const char *reason)
{
	char code[AUDIT_TOKEN_MAX];

	if (!latchd_audit_wanted(ld, who, "dns"))
		return;
	snprintf(code, sizeof(code), "latchd.dns.%s", reason);
	latchd_audit(ld, who, "dns", "deny", code, json_pack("{s:s, s:i}", "name", qname, "qtype", qtype));
}

/*
 * Is there room in the audit log for (sandbox, kind) right now?  Busy paths
 * (every answer, refusal and kernel deny) ask first, so an entry the rate
 * limit would drop is never built; a skipped one is counted all the same.
 */
bool latchd_audit_wanted(struct latchd *ld, const char *sandbox, const char *kind)
{
	return ld->audit && audit_room(ld->audit, sandbox, kind);
}

json_t *latchd_addr_json(const struct latch_addr *a)
{
	char buf[INET6_ADDRSTRLEN];

	latch_addr_format(a, buf, sizeof(buf));
	return json_string(buf);
}

/* ---- kernel deny events ---- */

static int on_event(const struct latch_event *ev, void *ctx)
{
	struct sandbox *s = ctx;
	struct latch_addr src = { 0 }, dst = { 0 };
	json_t *f;

	if (!latchd_audit_wanted(s->ld, s->name, "kernel"))
		return 0;
	f = json_pack("{s:s, s:i}", "dir", ev->dir == LATCH_DIR_FROM_GUEST ? "from-guest" : "to-guest", "suppressed",
		      (int)ev->suppressed);
	if (ev->family == 4 || ev->family == 6) {
		src.family = dst.family = ev->family == 4 ? AF_INET : AF_INET6;
		memcpy(src.bytes, ev->src_addr, 16);
		memcpy(dst.bytes, ev->dst_addr, 16);
		json_object_set_new(f, "src", latchd_addr_json(&src));
		json_object_set_new(f, "dst", latchd_addr_json(&dst));
		json_object_set_new(f, "proto", json_integer(ev->proto));
		if (ev->dst_port)
			json_object_set_new(f, "dport", json_integer(ntohs(ev->dst_port)));
		/* drop_sni_*: the name the guest sent, as the hash the names map keys it by */
		if (ev->name_hash) {
			char hex[17];

			snprintf(hex, sizeof(hex), "%016llx", (unsigned long long)ev->name_hash);
			json_object_set_new(f, "sni_hash", json_string(hex));
		}
	} else {
		json_object_set_new(f, "ethertype", json_integer(ev->eth_proto));
	}
	latchd_audit(s->ld, s->name, "kernel", "deny", latch_reason_name(ev->reason), f);
	return 0;
}

static void on_ring(evutil_socket_t fd, short what, void *arg)
{
	struct sandbox *s = arg;

	latch_events_consume(s->events);
}

/* Read the sandbox's deny events from now on; without them it is served all the same. */
void latchd_events_open(struct sandbox *s)
{
	s->events = latch_events_open(s->sb, on_event, s);
	if (!s->events) {
		latchd_log("%s: cannot read its deny events", s->name);
		return;
	}
	s->rb_ev = event_new(s->ld->base, latch_events_fd(s->events), EV_READ | EV_PERSIST, on_ring, s);
	if (s->rb_ev)
		event_add(s->rb_ev, NULL);
}

void latchd_events_close(struct sandbox *s)
{
	if (s->rb_ev)
		event_free(s->rb_ev);
	latch_events_free(s->events);
	s->rb_ev = NULL;
	s->events = NULL;
}
