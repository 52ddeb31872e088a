// SPDX-License-Identifier: GPL-2.0-only
/*
 * dnsload.c - a UDP DNS load client cheap enough that the server sets the
 * pace (bench/latchd.sh's saturated resolver runs).
 *
 *   dnsload -s ADDR [-p PORT] -d FILE -l SECS [-q WINDOW] [-c SOCKETS] [-t TIMEOUT_S]
 *
 * dnsperf, the reference client, spends about 8 us of CPU a query here
 * (two threads on one CPU that wake each other), more than either server
 * it measures: beside dnsmasq and latchd's resolver it was busy 100 % of
 * every run while the servers slept every 30-70 answers for want of a
 * query, so its queries/s were its own rate, not the server's.  This
 * client keeps WINDOW queries outstanding from one thread, sends them with
 * sendmmsg() and reads the answers with recvmmsg() (up to 64 a call), and
 * sleeps in poll() only when it has nothing to send and nothing to read.
 * Against either server on a CPU of its own, the server then runs ~99 %
 * of the time and sleeps once in tens of thousands of answers.
 *
 * FILE: dnsperf's format, one "NAME TYPE" a line, asked in turn.  Queries
 * are made with ldns (RD set, no EDNS, as dnsperf sends them); an answer
 * counts when its ID is outstanding and its question is the one asked.
 * A query unanswered after TIMEOUT_S (2) is lost.  Answers received up to
 * SECS count towards queries/s; then the outstanding ones have TIMEOUT_S
 * to come back or be lost.  Prints dnsperf's own summary lines (the same
 * names: bench/latchd.sh reads either client's), plus the client's CPU.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <ldns/ldns.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define BATCH 64
#define SOCKETS_MAX 16
#define QUERY_MAX 512
#define ANSWER_MAX 4096

struct query {
	uint8_t wire[QUERY_MAX];
	size_t len;
};

#define USAGE \
	"usage: dnsload -s ADDR [-p PORT] -d FILE -l SECS (1-3600) [-q WINDOW (1-65535)] [-c SOCKETS (1-16)] [-t TIMEOUT_S]"

/*
 * The query IDs: a slot per ID, and the free ones in a ring, handed out
 * in a rotating order (an ID comes back into use as late as it can).
 */
struct ids {
	struct {
		uint64_t sent_ns; /* 0: free */
		uint32_t query;
	} slot[65536];
	uint16_t ring[65536];
	unsigned head, n_free;
	uint64_t outstanding;
};

static uint16_t id_take(struct ids *p, uint64_t now, uint32_t query)
{
	uint16_t id = p->ring[p->head];

	p->head = (p->head + 1) & 0xffff;
	p->n_free--;
	p->outstanding++;
	p->slot[id].sent_ns = now;
	p->slot[id].query = query;
	return id;
}

/* Not sent after all: back in front, the next to be taken. */
static void id_untake(struct ids *p, uint16_t id)
{
	p->slot[id].sent_ns = 0;
	p->head = (p->head - 1) & 0xffff;
	p->ring[p->head] = id;
	p->n_free++;
	p->outstanding--;
}

/* Answered or lost: to the ring's end. */
static void id_done(struct ids *p, uint16_t id)
{
	p->slot[id].sent_ns = 0;
	p->ring[(p->head + p->n_free) & 0xffff] = id;
	p->n_free++;
	p->outstanding--;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void die(const char *fmt, const char *arg)
{
	fprintf(stderr, "dnsload: ");
	fprintf(stderr, fmt, arg);
	fputc('\n', stderr);
	exit(1);
}

/* FILE's "NAME TYPE" lines as query wires (ID 0; each send writes its slot's). */
static struct query *load_queries(const char *path, size_t *n)
{
	FILE *f = fopen(path, "r");
	struct query *qs = NULL;
	size_t cap = 0;
	char line[512];
	unsigned lineno = 0;

	if (!f)
		die("%s: cannot open", path);
	*n = 0;
	while (fgets(line, sizeof(line), f)) {
		char name[300], type[32];
		ldns_pkt *pkt = NULL;
		uint8_t *wire = NULL;
		size_t len = 0;
		ldns_rr_type t;

		lineno++;
		if (sscanf(line, "%299s %31s", name, type) != 2)
			continue;
		t = ldns_get_rr_type_by_name(type);
		if (!t || ldns_pkt_query_new_frm_str(&pkt, name, t, LDNS_RR_CLASS_IN, LDNS_RD) != LDNS_STATUS_OK ||
		    ldns_pkt2wire(&wire, pkt, &len) != LDNS_STATUS_OK || len > QUERY_MAX) {
			fprintf(stderr, "dnsload: %s line %u: not a query this client can send: %s", path, lineno,
				line);
			exit(1);
		}
		if (*n == cap) {
			cap = cap ? 2 * cap : 1024;
			qs = realloc(qs, cap * sizeof(*qs));
			if (!qs)
				die("%s", "out of memory");
		}
		memcpy(qs[*n].wire, wire, len);
		qs[*n].len = len;
		(*n)++;
		free(wire);
		ldns_pkt_free(pkt);
	}
	fclose(f);
	if (!*n)
		die("%s: no queries (lines \"NAME TYPE\")", path);
	return qs;
}

int main(int argc, char **argv)
{
	const char *server = NULL, *file = NULL;
	unsigned port = 53, window = 64, nsock = 1;
	double secs = 0, timeout_s = 2;
	int opt;

	while ((opt = getopt(argc, argv, "s:p:d:l:q:c:t:")) != -1) {
		switch (opt) {
		case 's':
			server = optarg;
			break;
		case 'p':
			port = (unsigned)atoi(optarg);
			break;
		case 'd':
			file = optarg;
			break;
		case 'l':
			secs = atof(optarg);
			break;
		case 'q':
			window = (unsigned)atoi(optarg);
			break;
		case 'c':
			nsock = (unsigned)atoi(optarg);
			break;
		case 't':
			timeout_s = atof(optarg);
			break;
		default:
			die("%s", USAGE);
		}
	}
	if (!server || !file || secs <= 0 || secs > 3600 || !window || window > 65535 || !nsock ||
	    nsock > SOCKETS_MAX || timeout_s <= 0 || timeout_s > 60 || !port || port > 65535)
		die("%s", USAGE);

	struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	if (inet_pton(AF_INET, server, &to.sin_addr) != 1)
		die("-s %s: not an IPv4 address", server);

	size_t nq;
	struct query *qs = load_queries(file, &nq);
	struct ids *ids = calloc(1, sizeof(*ids));
	struct pollfd pfd[SOCKETS_MAX];
	int fds[SOCKETS_MAX];

	if (!ids)
		die("%s", "out of memory");
	for (unsigned i = 0; i < nsock; i++) {
		int buf = 4 << 20;

		fds[i] = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
		if (fds[i] < 0 || connect(fds[i], (struct sockaddr *)&to, sizeof(to)))
			die("cannot connect a UDP socket to %s", server);
		setsockopt(fds[i], SOL_SOCKET, SO_RCVBUF, &buf, sizeof(buf));
		pfd[i] = (struct pollfd){ .fd = fds[i], .events = POLLIN };
	}
	ids->n_free = 65536;
	for (unsigned i = 0; i < 65536; i++)
		ids->ring[i] = (uint16_t)i;

	static uint8_t out[BATCH][QUERY_MAX], in[BATCH][ANSWER_MAX];
	struct mmsghdr omsg[BATCH], imsg[BATCH];
	struct iovec oiov[BATCH], iiov[BATCH];
	uint64_t sent = 0, answered = 0, late = 0, lost = 0, mismatched = 0, rcodes[16] = { 0 };
	uint64_t lat_sum_ns = 0, next_sweep;
	uint64_t t0 = now_ns(), end = t0 + (uint64_t)(secs * 1e9), timeout_ns = (uint64_t)(timeout_s * 1e9);
	uint64_t drain_end = end + timeout_ns;
	size_t next_query = 0;
	unsigned sock_rr = 0;
	struct rusage ru0, ru1;

	getrusage(RUSAGE_SELF, &ru0);
	for (unsigned i = 0; i < BATCH; i++) {
		iiov[i] = (struct iovec){ in[i], ANSWER_MAX };
		imsg[i] = (struct mmsghdr){ .msg_hdr = { .msg_iov = &iiov[i], .msg_iovlen = 1 } };
	}
	next_sweep = t0 + 10000000;
	for (;;) {
		uint64_t now = now_ns();
		bool sending = now < end;
		int did = 0;

		if (!sending && (!ids->outstanding || now >= drain_end))
			break;
		/* send: the window's free places, a batch at a time, each batch on the next socket */
		while (sending && ids->outstanding < window && ids->n_free) {
			unsigned n = 0;

			while (n < BATCH && ids->outstanding < window && ids->n_free) {
				const struct query *q = &qs[next_query];
				uint16_t id = id_take(ids, now, (uint32_t)next_query);

				memcpy(out[n], q->wire, q->len);
				out[n][0] = (uint8_t)(id >> 8);
				out[n][1] = (uint8_t)id;
				oiov[n] = (struct iovec){ out[n], q->len };
				omsg[n] = (struct mmsghdr){ .msg_hdr = { .msg_iov = &oiov[n], .msg_iovlen = 1 } };
				next_query = next_query + 1 == nq ? 0 : next_query + 1;
				n++;
			}
			int k = sendmmsg(fds[sock_rr], omsg, n, 0);
			if (k < 0 && errno != EAGAIN && errno != ENOBUFS && errno != EINTR)
				die("sendmmsg: %s", strerror(errno));
			k = k < 0 ? 0 : k;
			/* what the socket did not take goes back, in the order it was taken */
			for (int i = (int)n - 1; i >= k; i--)
				id_untake(ids, (uint16_t)((out[i][0] << 8) | out[i][1]));
			sent += (uint64_t)k;
			sock_rr = (sock_rr + 1) % nsock;
			did += k;
			if (k < (int)n)
				break;
		}
		/* read: everything waiting on every socket */
		for (unsigned s = 0; s < nsock; s++) {
			int k;

			while ((k = recvmmsg(fds[s], imsg, BATCH, MSG_DONTWAIT, NULL)) > 0) {
				uint64_t at = now_ns();

				for (int i = 0; i < k; i++) {
					const uint8_t *a = in[i];
					size_t len = imsg[i].msg_len;
					uint16_t id;
					const struct query *q;

					if (len < LDNS_HEADER_SIZE) {
						mismatched++;
						continue;
					}
					id = LDNS_ID_WIRE(a);
					q = &qs[ids->slot[id].query];
					/* the question as asked: the bytes after the header up to the query's end */
					if (!ids->slot[id].sent_ns || !LDNS_QR_WIRE(a) || len < q->len ||
					    memcmp(a + LDNS_HEADER_SIZE, q->wire + LDNS_HEADER_SIZE,
						   q->len - LDNS_HEADER_SIZE)) {
						mismatched++;
						continue;
					}
					if (at < end) {
						answered++;
						rcodes[LDNS_RCODE_WIRE(a) & 15]++;
						lat_sum_ns += at - ids->slot[id].sent_ns;
					} else {
						late++;
					}
					id_done(ids, id);
				}
				did += k;
			}
			if (k < 0 && errno != EAGAIN && errno != EINTR && errno != ECONNREFUSED)
				die("recvmmsg: %s", strerror(errno));
		}
		/* lost: outstanding past the timeout (swept every 10 ms) */
		if (now >= next_sweep) {
			for (unsigned id = 0; id < 65536 && ids->outstanding; id++) {
				if (ids->slot[id].sent_ns && now - ids->slot[id].sent_ns > timeout_ns) {
					id_done(ids, (uint16_t)id);
					lost++;
				}
			}
			next_sweep = now + 10000000;
		}
		if (!did)
			poll(pfd, nsock, 1);
	}
	lost += ids->outstanding;
	getrusage(RUSAGE_SELF, &ru1);

	double cpu_s =
		(double)(ru1.ru_utime.tv_sec - ru0.ru_utime.tv_sec + ru1.ru_stime.tv_sec - ru0.ru_stime.tv_sec) +
		(double)(ru1.ru_utime.tv_usec - ru0.ru_utime.tv_usec + ru1.ru_stime.tv_usec - ru0.ru_stime.tv_usec) /
			1e6;
	printf("  Queries sent:         %llu\n", (unsigned long long)sent);
	printf("  Queries completed:    %llu\n", (unsigned long long)answered);
	printf("  Queries lost:         %llu\n", (unsigned long long)lost);
	printf("  Answers after the run: %llu\n", (unsigned long long)late);
	printf("  Answers not matching a query: %llu\n", (unsigned long long)mismatched);
	printf("  Response codes:       ");
	for (int r = 0, first = 1; r < 16; r++) {
		const ldns_lookup_table *lt = ldns_lookup_by_id(ldns_rcodes, r);

		if (!rcodes[r])
			continue;
		printf("%s%s %llu (%.2f%%)", first ? "" : ", ", lt ? lt->name : "RCODE?", (unsigned long long)rcodes[r],
		       answered ? 100.0 * (double)rcodes[r] / (double)answered : 0);
		first = 0;
	}
	printf("\n");
	printf("  Queries per second:   %f\n", (double)answered / secs);
	printf("  Average Latency (s):  %f\n", answered ? (double)lat_sum_ns / (double)answered / 1e9 : 0);
	printf("  Client CPU per query (us): %.2f\n", answered ? cpu_s * 1e6 / (double)answered : 0);
	for (unsigned i = 0; i < nsock; i++)
		close(fds[i]);
	free(ids);
	free(qs);
	return 0;
}
