// SPDX-License-Identifier: GPL-2.0-only
/*
 * ask.c - latch-ask, the sandbox's way to ask for a grant (docs/grants.md).
 *
 *   latch-ask [--for DUR] [--port N]... [--reason TEXT] [--url URL] [--json] HOST[:PORTS]...
 *
 * It POSTs {"hosts", "ports", "seconds", "reason"} to /latch/grant on the
 * sandbox's broker listener (the default gateway, port 8119; --url or
 * $LATCH_ASK_URL say otherwise) and waits there until a person on the host
 * decides (`latch approve` / `latch deny`), or the host's wait runs out.  It
 * can only ask: nothing this program or the guest holds can decide.  The
 * answer says what opened and until when; the host resolves the names and
 * the host's kernel closes them at the deadline.
 *
 * Exit 0 approved; 1 denied, timed out or refused (the line says which); 2
 * usage; 3 the host could not be asked.  Built static with jansson
 * (gcc -static ... -ljansson): the default image's initramfs has no libc.
 * Why C and not a busybox script: the reason is free text that must be
 * escaped into JSON and the answer parsed out of it, which busybox sh and
 * wget do not do safely, and busybox wget hides the body of a 403.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "common/common.h"

#define ASK_PORT 8119
#define ASK_WAIT_S 600 /* the host decides within grant_ask_wait (120 s by default); then it answers */
#define ANSWER_MAX (64 * 1024)

static int usage(FILE *f, int code)
{
	fprintf(f,
		"usage: latch-ask [--for DUR] [--port N]... [--reason TEXT] [--url URL] [--json] HOST[:PORTS]...\n"
		"  Ask the host to open HOSTs (names, never addresses) for a while; a person approves or\n"
		"  denies it outside the sandbox. DUR: 60, 90s, 5m (the host caps it). Ports default to 443.\n"
		"  The URL defaults to $LATCH_ASK_URL, else http://GATEWAY:%d/latch/grant.\n"
		"  Exit 0 approved, 1 denied/timed out/refused, 2 usage, 3 the host could not be asked.\n",
		ASK_PORT);
	return code;
}

/* The default gateway, from /proc/net/route: the host side of the sandbox's link. */
static int gateway(char *buf, size_t len)
{
	FILE *f = fopen("/proc/net/route", "re");
	char line[256], ifname[32];
	unsigned dst, gw, flags;
	int rc = -ENOENT;

	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%31s %x %x %x", ifname, &dst, &gw, &flags) == 4 && dst == 0 && (flags & 2)) {
			struct in_addr a = { .s_addr = gw };

			rc = inet_ntop(AF_INET, &a, buf, len) ? 0 : -EINVAL;
			break;
		}
	fclose(f);
	return rc;
}

/* http://HOST[:PORT]/PATH, HOST an address or [v6]; what the guest's broker URL looks like. */
static int url_split(const char *url, char *host, size_t hlen, char *port, size_t plen, const char **path)
{
	const char *h, *end, *colon;

	if (strncmp(url, "http://", 7))
		return -EINVAL;
	h = url + 7;
	*path = strchr(h, '/');
	if (!*path)
		*path = "/latch/grant";
	end = strchr(h, '/') ? strchr(h, '/') : h + strlen(h);
	if (*h == '[') {
		const char *rb = memchr(h, ']', end - h);

		if (!rb)
			return -EINVAL;
		snprintf(host, hlen, "%.*s", (int)(rb - h - 1), h + 1);
		colon = rb + 1 < end && rb[1] == ':' ? rb + 1 : NULL;
	} else {
		colon = memchr(h, ':', end - h);
		snprintf(host, hlen, "%.*s", (int)((colon ? colon : end) - h), h);
	}
	snprintf(port, plen, "%.*s", colon ? (int)(end - colon - 1) : 4, colon ? colon + 1 : "8119");
	return host[0] && port[0] ? 0 : -EINVAL;
}

/* HOST is an address (the broker is on the host's side of the link): no resolver, no NSS in a static binary. */
static int connect_to(const char *host, const char *port, long wait_s)
{
	struct sockaddr_in6 s6 = { .sin6_family = AF_INET6 };
	struct sockaddr_in s4 = { .sin_family = AF_INET };
	struct timeval tv = { .tv_sec = wait_s };
	long p = strtol(port, NULL, 10);
	struct sockaddr *sa;
	socklen_t len;
	int fd;

	if (p < 1 || p > 65535)
		return -EINVAL;
	s4.sin_port = s6.sin6_port = htons((uint16_t)p);
	if (inet_pton(AF_INET, host, &s4.sin_addr) == 1) {
		sa = (struct sockaddr *)&s4;
		len = sizeof(s4);
	} else if (inet_pton(AF_INET6, host, &s6.sin6_addr) == 1) {
		sa = (struct sockaddr *)&s6;
		len = sizeof(s6);
	} else {
		return -EINVAL;
	}
	fd = socket(sa->sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (connect(fd, sa, len)) {
		int e = -errno;

		close(fd);
		return e;
	}
	return fd;
}

/* POST body, read the whole answer (Connection: close); the status, with the body in *out. */
static int post(const char *url, const char *body, long wait_s, char **out)
{
	char host[128], port[8], *buf;
	const char *path;
	size_t have = 0;
	int fd, status = -1;
	FILE *f;

	if (url_split(url, host, sizeof(host), port, sizeof(port), &path))
		return -EINVAL;
	fd = connect_to(host, port, wait_s);
	if (fd < 0)
		return fd;
	f = fdopen(fd, "r+");
	buf = calloc(1, ANSWER_MAX + 1);
	if (!f || !buf) {
		free(buf);
		close(fd);
		return -ENOMEM;
	}
	fprintf(f,
		"POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
		"Connection: close\r\n\r\n%s",
		path, host, strlen(body), body);
	fflush(f);
	while (have < ANSWER_MAX) {
		size_t n = fread(buf + have, 1, ANSWER_MAX - have, f);

		if (!n)
			break;
		have += n;
	}
	fclose(f);
	if (sscanf(buf, "HTTP/1.%*d %d", &status) != 1) {
		free(buf);
		return -EPROTO;
	}
	*out = buf;
	return status;
}

static void print_answer(json_t *a)
{
	const char *decision = json_string_value(json_object_get(a, "decision"));
	json_t *h, *addr;
	size_t i, k;

	if (strcmp(decision, "approved")) {
		printf("%s: %s\n", decision,
		       json_string_value(json_object_get(a, "message")) ?: "latch: no reason given");
		return;
	}
	printf("approved:");
	json_array_foreach(json_object_get(a, "hosts"), i, h) {
		printf("%s %s:%s (", i ? "," : "", json_string_value(json_object_get(h, "name")),
		       json_string_value(json_object_get(h, "ports")));
		json_array_foreach(json_object_get(h, "addresses"), k, addr)
			printf("%s%s", k ? " " : "", json_string_value(addr));
		printf(")");
	}
	printf(" open for %.0f s; the host closes it then\n", json_number_value(json_object_get(a, "seconds_left")));
}

/* What the command line asks. */
struct ask {
	const char *url, *reason;
	json_t *hosts, *ports;
	bool as_json;
	long seconds;
};

/* Read the command line into ASK.  Returns -1 to go on, else the exit code. */
static int parse_args(int argc, char **argv, struct ask *ask)
{
	static const struct option opts[] = { { "for", required_argument, NULL, 'f' },
					      { "port", required_argument, NULL, 'p' },
					      { "reason", required_argument, NULL, 'r' },
					      { "url", required_argument, NULL, 'u' },
					      { "json", no_argument, NULL, 'j' },
					      { "help", no_argument, NULL, 'h' },
					      { NULL, 0, NULL, 0 } };
	int c;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'f': {
			char err[LATCH_ERR_MAX];
			uint32_t s;

			/* the host's grammar, linked in: 60, 90s, 5m, 1h */
			if (latch_parse_seconds("--for", optarg, 1, 86400, &s, err, sizeof(err))) {
				fprintf(stderr, "latch-ask: %s\n", err);
				return 2;
			}
			ask->seconds = s;
			break;
		}
		case 'p': {
			long p = strtol(optarg, NULL, 10);

			if (p < 1 || p > 65535)
				return usage(stderr, 2);
			json_array_append_new(ask->ports, json_integer(p));
			break;
		}
		case 'r':
			ask->reason = optarg;
			break;
		case 'u':
			ask->url = optarg;
			break;
		case 'j':
			ask->as_json = true;
			break;
		case 'h':
			return usage(stdout, 0);
		default:
			return usage(stderr, 2);
		}
	}
	if (optind >= argc)
		return usage(stderr, 2);
	for (int i = optind; i < argc; i++)
		if (json_array_append_new(ask->hosts, json_string(argv[i]))) {
			fprintf(stderr, "latch-ask: '%s' is not valid UTF-8\n", argv[i]);
			return 2;
		}
	return -1;
}

/* Print the host's ANSWER (status line, headers and body) to URL; returns the exit code. */
static int read_answer(const struct ask *ask, int status, const char *answer)
{
	const char *body = strstr(answer, "\r\n\r\n");
	json_t *a = body ? json_loads(body + 4, JSON_DISABLE_EOF_CHECK, NULL) : NULL;
	int code;

	if (!json_is_string(json_object_get(a, "decision"))) {
		fprintf(stderr, "latch-ask: HTTP %d with no decision from %s\n", status, ask->url);
		json_decref(a);
		return 3;
	}
	if (ask->as_json) {
		json_dumpf(a, stdout, JSON_COMPACT);
		putchar('\n');
	} else {
		print_answer(a);
	}
	code = status == 200 && !strcmp(json_string_value(json_object_get(a, "decision")), "approved") ? 0 : 1;
	json_decref(a);
	return code;
}

int main(int argc, char **argv)
{
	struct ask ask = { .url = getenv("LATCH_ASK_URL"), .hosts = json_array(), .ports = json_array() };
	char gw[64], dflt[128], *text, *answer = NULL;
	json_t *req = json_object();
	int code, status;

	code = parse_args(argc, argv, &ask);
	if (code >= 0)
		return code;
	if (!ask.url || !*ask.url) {
		if (gateway(gw, sizeof(gw))) {
			fprintf(stderr, "latch-ask: no default route to find the host by; give --url\n");
			return 3;
		}
		snprintf(dflt, sizeof(dflt), "http://%s:%d/latch/grant", gw, ASK_PORT);
		ask.url = dflt;
	}
	json_object_set_new(req, "hosts", ask.hosts);
	if (json_array_size(ask.ports))
		json_object_set(req, "ports", ask.ports);
	json_decref(ask.ports);
	if (ask.seconds)
		json_object_set_new(req, "seconds", json_integer(ask.seconds));
	if (ask.reason && json_object_set_new(req, "reason", json_string(ask.reason))) {
		fprintf(stderr, "latch-ask: the reason is not valid UTF-8\n");
		return 2;
	}
	text = json_dumps(req, JSON_COMPACT);
	json_decref(req);
	status = post(ask.url, text, ASK_WAIT_S, &answer);
	free(text);
	if (status < 0) {
		fprintf(stderr, "latch-ask: cannot ask at %s: %s\n", ask.url, strerror(-status));
		return 3;
	}
	code = read_answer(&ask, status, answer);
	free(answer);
	return code;
}
