// SPDX-License-Identifier: GPL-2.0-only
/*
 * guest_rawsend.c - latch-rawsend, a tiny static tool in the default guest
 * image that opens an AF_PACKET raw socket and sends crafted Ethernet
 * frames, so the guest attack selftest (selftests/vm_attack.sh) can try what
 * a root user in a guest can: frames the guest's own stack would never
 * build.  It only sends; whether a frame got anywhere is judged on the host.
 *
 *   latch-rawsend DEV hex HEXBYTES
 *   latch-rawsend DEV udp4 SRCMAC DSTMAC SRCIP DSTIP DPORT [PAYLOAD]
 *   latch-rawsend DEV arp SRCMAC SENDERIP TARGETIP     (gratuitous ARP reply)
 *   latch-rawsend DEV ethertype SRCMAC DSTMAC TYPE     (e.g. 0x88b5)
 *   latch-rawsend DEV vlan SRCMAC DSTMAC VID SRCIP DSTIP DPORT
 *
 * Exit 0 when the frame was handed to the device, 1 on a send error, 2 on
 * usage.  Built with `gcc -static`; the initramfs has no libc.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define FRAME_MAX 1514

static int usage(void)
{
	fprintf(stderr, "usage: latch-rawsend DEV hex HEX\n"
			"       latch-rawsend DEV udp4 SRCMAC DSTMAC SRCIP DSTIP DPORT [PAYLOAD]\n"
			"       latch-rawsend DEV arp SRCMAC SENDERIP TARGETIP\n"
			"       latch-rawsend DEV ethertype SRCMAC DSTMAC TYPE\n"
			"       latch-rawsend DEV vlan SRCMAC DSTMAC VID SRCIP DSTIP DPORT\n");
	return 2;
}

static int parse_mac(const char *s, uint8_t *m)
{
	unsigned int b[6];

	if (sscanf(s, "%x:%x:%x:%x:%x:%x", &b[0], &b[1], &b[2], &b[3], &b[4], &b[5]) != 6)
		return -EINVAL;
	for (int i = 0; i < 6; i++) {
		if (b[i] > 0xff)
			return -EINVAL;
		m[i] = b[i];
	}
	return 0;
}

static int parse_ip4(const char *s, uint8_t *a)
{
	return inet_pton(AF_INET, s, a) == 1 ? 0 : -EINVAL;
}

static uint16_t csum(const uint8_t *p, size_t n)
{
	uint32_t sum = 0;

	for (size_t i = 0; i + 1 < n; i += 2)
		sum += (p[i] << 8) | p[i + 1];
	if (n & 1)
		sum += p[n - 1] << 8;
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return ~sum & 0xffff;
}

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = v >> 8;
	p[1] = v & 0xff;
}

/* IPv4 + UDP (checksum 0, as IPv4 allows) at p; returns its length. */
static size_t build_udp4(uint8_t *p, const uint8_t *src, const uint8_t *dst, uint16_t dport, const char *payload)
{
	size_t plen = strlen(payload), tot = 20 + 8 + plen;

	memset(p, 0, 28);
	p[0] = 0x45;
	put16(p + 2, tot);
	p[6] = 0x40; /* DF */
	p[8] = 64;
	p[9] = 17;
	memcpy(p + 12, src, 4);
	memcpy(p + 16, dst, 4);
	put16(p + 10, csum(p, 20));
	put16(p + 20, 40000);
	put16(p + 22, dport);
	put16(p + 24, 8 + plen);
	memcpy(p + 28, payload, plen);
	return tot;
}

int main(int argc, char **argv)
{
	uint8_t f[FRAME_MAX], smac[6], dmac[6], sip[4], dip[4];
	struct sockaddr_ll sll = { .sll_family = AF_PACKET };
	const char *mode;
	size_t n = 0;
	int fd;

	if (argc < 3)
		return usage();
	mode = argv[2];
	memset(f, 0, sizeof(f));
	if (!strcmp(mode, "hex") && argc == 4) {
		const char *h = argv[3];

		while (h[0] && h[1] && n < sizeof(f)) {
			if (!isxdigit((unsigned char)h[0]) || !isxdigit((unsigned char)h[1]) ||
			    sscanf(h, "%2hhx", &f[n]) != 1)
				return usage();
			n++;
			h += 2;
		}
	} else if (!strcmp(mode, "udp4") && (argc == 8 || argc == 9)) {
		if (parse_mac(argv[3], smac) || parse_mac(argv[4], dmac) || parse_ip4(argv[5], sip) ||
		    parse_ip4(argv[6], dip))
			return usage();
		memcpy(f, dmac, 6);
		memcpy(f + 6, smac, 6);
		put16(f + 12, ETH_P_IP);
		n = 14 + build_udp4(f + 14, sip, dip, atoi(argv[7]), argc == 9 ? argv[8] : "latch-rawsend");
	} else if (!strcmp(mode, "vlan") && argc == 9) {
		if (parse_mac(argv[3], smac) || parse_mac(argv[4], dmac) || parse_ip4(argv[6], sip) ||
		    parse_ip4(argv[7], dip))
			return usage();
		memcpy(f, dmac, 6);
		memcpy(f + 6, smac, 6);
		put16(f + 12, ETH_P_8021Q);
		put16(f + 14, atoi(argv[5]) & 0xfff);
		put16(f + 16, ETH_P_IP);
		n = 18 + build_udp4(f + 18, sip, dip, atoi(argv[8]), "latch-rawsend");
	} else if (!strcmp(mode, "arp") && argc == 6) {
		if (parse_mac(argv[3], smac) || parse_ip4(argv[4], sip) || parse_ip4(argv[5], dip))
			return usage();
		memset(f, 0xff, 6);
		memcpy(f + 6, smac, 6);
		put16(f + 12, ETH_P_ARP);
		put16(f + 14, 1); /* Ethernet */
		put16(f + 16, ETH_P_IP);
		f[18] = 6;
		f[19] = 4;
		put16(f + 20, 2); /* reply */
		memcpy(f + 22, smac, 6);
		memcpy(f + 28, sip, 4);
		memset(f + 32, 0xff, 6);
		memcpy(f + 38, dip, 4);
		n = 42;
	} else if (!strcmp(mode, "ethertype") && argc == 6) {
		if (parse_mac(argv[3], smac) || parse_mac(argv[4], dmac))
			return usage();
		memcpy(f, dmac, 6);
		memcpy(f + 6, smac, 6);
		put16(f + 12, strtoul(argv[5], NULL, 0));
		memcpy(f + 14, "latch-rawsend", 13);
		n = 14 + 46;
	} else {
		return usage();
	}
	if (n < 60)
		n = 60; /* minimum Ethernet payload; the rest is zero padding */

	sll.sll_ifindex = if_nametoindex(argv[1]);
	if (!sll.sll_ifindex) {
		fprintf(stderr, "latch-rawsend: %s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	sll.sll_halen = 6;
	memcpy(sll.sll_addr, f, 6);
	fd = socket(AF_PACKET, SOCK_RAW, 0);
	if (fd < 0) {
		fprintf(stderr, "latch-rawsend: socket: %s\n", strerror(errno));
		return 1;
	}
	if (sendto(fd, f, n, 0, (struct sockaddr *)&sll, sizeof(sll)) != (ssize_t)n) {
		fprintf(stderr, "latch-rawsend: sendto: %s\n", strerror(errno));
		close(fd);
		return 1;
	}
	close(fd);
	printf("sent %zu bytes on %s\n", n, argv[1]);
	return 0;
}
