// SPDX-License-Identifier: GPL-2.0-only
/*
 * grant_notify.c - telling the person that the sandbox asks.
 *
 * Each ask goes, as one JSON document (docs/grants.md), to notify_command
 * (a program run with the document on stdin) and to notify_url (POSTed
 * with libcurl), each in a child process so that no resolver or broker
 * waits for a slow phone.  Children are bounded in time (notify_timeout,
 * and notify_retries for the POST) and killed past it.
 *
 * Nothing a notifier says is read: the program's stdout and stderr go to
 * /dev/null, the webhook's body is discarded, and only the exit status or
 * the HTTP status reaches the audit log.  A decision comes only over
 * latchd's root-only socket (`latch approve`, `latch deny`), so neither the
 * notifier nor anyone answering it can approve anything, and the channel is
 * not the sandbox's: it is configured on the host, in latch.conf.
 *
 * Every message names the sandbox, each host and its ports, the duration
 * and the reason, and labels the reason as the sandbox's own words.
 */
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "latchd/grant.h"
#include "latchd/room.h" /* latchd_confine_lookup() */

#define SAYS_IS "the sandbox's own words, unchecked: approve the destination if you expected it, not the sentence"

struct notify_child {
	struct notify_child *next;
	pid_t pid;
	uint64_t kill_at_ns;
	char sandbox[LATCH_NAME_MAX + 1];
	char id[GRANT_ID_CHARS + 1];
	const char *what; /* "command" or "url" */
};

struct notifier {
	struct notify_child *children;
};

/* "docs.example:443 and files.example:443,8443" */
static void hosts_text(const struct grant *g, char *buf, size_t len)
{
	size_t n = 0;

	buf[0] = '\0';
	for (int i = 0; i < g->n_hosts && n < len; i++) {
		char ports[160];

		latchd_grant_ports_text(&g->host[i].ports, ports, sizeof(ports));
		n += snprintf(buf + n, len - n, "%s%s:%s",
			      i == 0		  ? "" :
			      i == g->n_hosts - 1 ? " and " :
						    ", ",
			      g->host[i].name, ports);
	}
}

/* The document every notifier gets. */
static char *ask_document(const struct grant *g)
{
	char hosts[GRANT_HOSTS_MAX * 300], msg[GRANT_HOSTS_MAX * 300 + 8 * GRANT_REASON_MAX + 512], when[32],
		says[8 * GRANT_REASON_MAX + 64], shown[8 * GRANT_REASON_MAX + 1];
	time_t by = time(NULL) + (time_t)((g->wait_until_ns - latch_now_boot_ns()) / NS_PER_S);
	json_t *doc = latchd_grant_json(g, latch_now_boot_ns()), *text;
	struct tm tm;
	char *out;

	hosts_text(g, hosts, sizeof(hosts));
	localtime_r(&by, &tm);
	strftime(when, sizeof(when), "%H:%M:%S", &tm);
	/* checked when it came in; escaped here too, so nothing that got in another way can close the quotes */
	latch_text_escape(g->reason, shown, sizeof(shown));
	if (g->reason[0])
		snprintf(says, sizeof(says), "the sandbox says: \"%s\" (%s)", shown, "its own words, unchecked");
	else
		snprintf(says, sizeof(says), "the sandbox gave no reason");
	snprintf(msg, sizeof(msg),
		 "latch: sandbox %s asks to reach %s for %u s; %s. Approve it if you expected this destination: "
		 "latch approve %s (or --for DUR); deny it: latch deny %s. Denied by itself at %s if nobody decides.",
		 g->s->name, hosts, g->seconds, says, g->id, g->id, when);
	text = json_string(msg);
	json_object_set_new(doc, "type", json_string("latch.grant.ask"));
	json_object_set_new(doc, "message", text ? text : json_string("latch: a sandbox asks for a grant"));
	if (g->reason[0])
		json_object_set_new(doc, "sandbox_says_is", json_string(SAYS_IS));
	json_object_set_new(doc, "approve", json_sprintf("latch approve %s", g->id));
	json_object_set_new(doc, "deny", json_sprintf("latch deny %s", g->id));
	out = json_dumps(doc, JSON_COMPACT);
	json_decref(doc);
	return out;
}

/* In the child: a session of its own (so the whole group can be killed), stdin, no other fd of latchd. */
static void child_setup(int in)
{
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);

	setsid();
	dup2(in >= 0 ? in : null, STDIN_FILENO);
	dup2(null, STDOUT_FILENO); /* what a notifier says is never read */
	dup2(null, STDERR_FILENO);
	close_range(3, ~0U, 0); /* the control socket, the listeners, the maps */
	signal(SIGPIPE, SIG_DFL);
	signal(SIGCHLD, SIG_DFL);
}

/* Whom a notifier child speaks of: the ask may be decided (and gone) before the child ends. */
struct notice {
	struct latchd *ld;
	char sandbox[LATCH_NAME_MAX + 1];
	char id[GRANT_ID_CHARS + 1];
};

static void notice_of(const struct grant *g, struct notice *n)
{
	n->ld = g->s->ld;
	snprintf(n->sandbox, sizeof(n->sandbox), "%s", g->s->name);
	snprintf(n->id, sizeof(n->id), "%s", g->id);
}

static void child_add(const struct notice *n, pid_t pid, const char *what, uint64_t bound_s)
{
	struct notify_child *c = calloc(1, sizeof(*c));

	if (!c) { /* nobody would reap it: wait for it now, bounded by its own time limit */
		waitpid(pid, NULL, 0);
		return;
	}
	c->pid = pid;
	c->kill_at_ns = latch_now_boot_ns() + bound_s * NS_PER_S;
	snprintf(c->sandbox, sizeof(c->sandbox), "%s", n->sandbox);
	snprintf(c->id, sizeof(c->id), "%s", n->id);
	c->what = what;
	c->next = n->ld->notifier->children;
	n->ld->notifier->children = c;
}

static void notify_failed(const struct notice *n, const char *what, const char *why)
{
	latchd_log("%s: grant %s: notify_%s: %s", n->sandbox, n->id, what, why);
	latchd_audit(n->ld, n->sandbox, "grant", "notify-fail",
		     !strcmp(what, "url") ? "latchd.grant.notify.url" : "latchd.grant.notify.command",
		     json_pack("{s:s, s:s}", "id", n->id, "error", why));
}

static void spawn_command(const struct notice *n, const char *doc)
{
	struct latchd *ld = n->ld;
	const char *path = ld->conf.notify_command;
	char err[LATCH_ERR_MAX];
	struct stat st;
	pid_t pid;
	int in;

	/* it runs as root with every ask: root's file, writable by nobody else, like latch.conf */
	if (lstat(path, &st))
		return notify_failed(n, "command", strerror(errno));
	if (latch_file_check(path, &st, LATCH_FILE_CONFIG, err, sizeof(err)))
		return notify_failed(n, "command", err);
	if (!(st.st_mode & S_IXUSR))
		return notify_failed(n, "command", "not executable; chmod 0755 it");
	in = memfd_create("latch-ask", MFD_CLOEXEC);
	if (in < 0 || write(in, doc, strlen(doc)) != (ssize_t)strlen(doc) || lseek(in, 0, SEEK_SET)) {
		if (in >= 0)
			close(in);
		return notify_failed(n, "command", "cannot stage the ask for its stdin");
	}
	pid = fork();
	if (pid == 0) {
		char *const argv[] = { (char *)path, NULL };
		char *const envp[] = { "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
				       "LANG=C.UTF-8", NULL };

		child_setup(in);
		execve(path, argv, envp);
		_exit(127);
	}
	close(in);
	if (pid < 0)
		return notify_failed(n, "command", strerror(errno));
	child_add(n, pid, "command", ld->conf.notify_timeout);
}

static size_t discard(char *p, size_t size, size_t n, void *arg)
{
	return size * n; /* the webhook's answer decides nothing and is not kept */
}

/*
 * One POST: 0 on a 2xx, 2 when the server refused it (4xx but 408/429: no
 * retry), else 1.  RESOLVE pins the URL's host to what latchd looked up and
 * its confinement admits, so the child asks no resolver of its own.
 */
static int post_once(const char *url, struct curl_slist *resolve, const char *doc, long timeout_s)
{
	struct curl_slist *hdr = curl_slist_append(NULL, "Content-Type: application/json");
	CURL *c = curl_easy_init();
	long code = 0;
	CURLcode rc;

	if (!c || !hdr) {
		curl_slist_free_all(hdr);
		if (c)
			curl_easy_cleanup(c);
		return 1;
	}
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_RESOLVE, resolve);
	curl_easy_setopt(c, CURLOPT_POSTFIELDS, doc);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdr);
	curl_easy_setopt(c, CURLOPT_USERAGENT, "latchd");
	curl_easy_setopt(c, CURLOPT_TIMEOUT, timeout_s);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, timeout_s);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
	rc = curl_easy_perform(c);
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
	curl_easy_cleanup(c);
	curl_slist_free_all(hdr);
	if (rc == CURLE_OK && code >= 200 && code < 300)
		return 0;
	return rc == CURLE_OK && code >= 400 && code < 500 && code != 408 && code != 429 ? 2 : 1;
}

/* A POST of one ask, waiting for the lookup of the URL's host. */
struct post {
	struct notice n;
	char host[256]; /* the URL's host, IPv6 without brackets */
	long port;
	char *doc;
};

static void post_free(struct post *p)
{
	free(p->doc);
	free(p);
}

/* "HOST:PORT:ADDR,ADDR" for CURLOPT_RESOLVE (IPv6 in brackets); NULL when there is none. */
static struct curl_slist *resolve_list(const struct post *p, const struct latch_addr *addrs, int n)
{
	char line[2048], a[INET6_ADDRSTRLEN];
	size_t len = snprintf(line, sizeof(line), "%s:%ld:", p->host, p->port);

	for (int i = 0; i < n && len < sizeof(line); i++) {
		latch_addr_format(&addrs[i], a, sizeof(a));
		len += snprintf(line + len, sizeof(line) - len, addrs[i].family == AF_INET6 ? "%s[%s]" : "%s%s",
				i ? "," : "", a);
	}
	return n > 0 && len < sizeof(line) ? curl_slist_append(NULL, line) : NULL;
}

static void spawn_post(struct post *p, const struct latch_addr *addrs, int n)
{
	const struct latch_conf *cf = &p->n.ld->conf;
	unsigned tries = cf->notify_retries + 1, waits = 0;
	pid_t pid;

	for (unsigned t = 1; t < tries; t++)
		waits += 1u << (t - 1); /* 1 s, 2 s, 4 s... between tries */
	pid = fork();
	if (pid == 0) {
		struct curl_slist *resolve;
		int rc = 1;

		child_setup(-1);
		if (curl_global_init(CURL_GLOBAL_DEFAULT))
			_exit(1);
		resolve = resolve_list(p, addrs, n);
		for (unsigned t = 0; t < tries; t++) {
			rc = post_once(cf->notify_url, resolve, p->doc, cf->notify_timeout);
			if (rc != 1)
				break;
			if (t + 1 < tries)
				sleep(1u << t);
		}
		_exit(rc);
	}
	if (pid < 0)
		return notify_failed(&p->n, "url", strerror(errno));
	/* two timeouts a try (connect, then transfer) plus the waits, and a second of slack */
	child_add(&p->n, pid, "url", (uint64_t)tries * 2 * cf->notify_timeout + waits + 1);
}

static void post_resolved(void *arg, const char *name, const struct latch_addr *addrs, int n, uint32_t ttl,
			  const char *why)
{
	struct post *p = arg;

	if (n > 0)
		spawn_post(p, addrs, n);
	else
		notify_failed(&p->n, "url", why ? why : "the webhook's host has no address");
	post_free(p);
}

/*
 * latchd is confined (confine.c): the webhook's address is looked up and
 * admitted through latchd_confine_lookup() first, like a broker upstream's; a
 * public name or an address literal of the URL only.  Unconfined, libcurl
 * resolves it in the child.
 */
static void notify_url(const struct notice *n, const char *doc)
{
	struct post *p = calloc(1, sizeof(*p));
	CURLU *u = curl_url();
	char *host = NULL, *port = NULL;
	struct latch_entry ports = { .proto = LATCH_PROTO_TCP, .n_ports = 1 };
	int rc;

	if (!p || !u || !(p->doc = strdup(doc)) || curl_url_set(u, CURLUPART_URL, n->ld->conf.notify_url, 0) ||
	    curl_url_get(u, CURLUPART_HOST, &host, 0) || curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT)) {
		notify_failed(n, "url", "cannot read notify_url");
		goto out;
	}
	p->n = *n;
	snprintf(p->host, sizeof(p->host), "%.*s", host[0] == '[' ? (int)strlen(host) - 2 : (int)strlen(host),
		 host[0] == '[' ? host + 1 : host);
	p->port = strtol(port, NULL, 10);
	ports.ports[0].lo = ports.ports[0].hi = (uint16_t)p->port;
	rc = latchd_confine_lookup(n->ld, n->sandbox, p->host, &ports, post_resolved, p);
	if (rc == -ENOTCONN) { /* unconfined: nothing to admit */
		spawn_post(p, NULL, 0);
		post_free(p);
	} else if (rc) {
		notify_failed(n, "url", strerror(-rc));
		post_free(p);
	}
	p = NULL;
out:
	if (p)
		post_free(p);
	curl_free(host);
	curl_free(port);
	curl_url_cleanup(u);
}

void latchd_grant_notify(struct grant *g)
{
	struct latchd *ld = g->s->ld;
	struct notice n;
	char *doc;

	if (!ld->conf.notify_command[0] && !ld->conf.notify_url[0])
		return;
	if (!ld->notifier && !(ld->notifier = calloc(1, sizeof(*ld->notifier))))
		return;
	doc = ask_document(g);
	if (!doc)
		return;
	notice_of(g, &n);
	if (ld->conf.notify_command[0])
		spawn_command(&n, doc);
	if (ld->conf.notify_url[0])
		notify_url(&n, doc);
	free(doc);
}

static void child_done(struct latchd *ld, const struct notify_child *c, int status, bool killed)
{
	int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
	bool ok = !killed && code == 0;
	char why[96];

	snprintf(why, sizeof(why), "%s",
		 killed				      ? "killed at its time limit (notify_timeout)" :
		 ok				      ? "delivered" :
		 !strcmp(c->what, "url") && code == 2 ? "the server refused the POST" :
		 code == 127			      ? "could not be run" :
							"failed");
	if (!ok)
		latchd_log("%s: grant %s: notify_%s %s (exit %d)", c->sandbox, c->id, c->what, why, code);
	latchd_audit(ld, c->sandbox, "grant", ok ? "notify" : "notify-fail",
		     !strcmp(c->what, "url") ? "latchd.grant.notify.url" : "latchd.grant.notify.command",
		     json_pack("{s:s, s:s, s:i}", "id", c->id, "result", why, "exit", code));
}

void latchd_notifier_tick(struct latchd *ld, uint64_t now)
{
	if (!ld->notifier)
		return;
	for (struct notify_child **pp = &ld->notifier->children; *pp;) {
		struct notify_child *c = *pp;
		int status = 0;
		bool killed = false;
		pid_t r = waitpid(c->pid, &status, WNOHANG);

		if (r == 0 && now >= c->kill_at_ns) {
			kill(-c->pid, SIGKILL); /* its session: a script's children too */
			kill(c->pid, SIGKILL);
			r = waitpid(c->pid, &status, 0);
			killed = true;
		}
		if (r == 0) {
			pp = &c->next;
			continue;
		}
		if (r == c->pid)
			child_done(ld, c, status, killed);
		*pp = c->next;
		free(c);
	}
}

void latchd_notifier_stop(struct latchd *ld)
{
	if (!ld->notifier)
		return;
	for (struct notify_child *c = ld->notifier->children; c; c = c->next)
		c->kill_at_ns = 0; /* at shutdown a notifier still running is cut */
	latchd_notifier_tick(ld, latch_now_boot_ns());
	free(ld->notifier);
	ld->notifier = NULL;
}
