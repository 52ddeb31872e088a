#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""vnet_send.py - a guest's checksum-offload request, as virtio-net makes it.

QEMU hands a virtio-net guest's frames to the host's tap with the guest's
virtio_net_hdr in front, and tun turns VIRTIO_NET_HDR_F_NEEDS_CSUM into
CHECKSUM_PARTIAL: whoever transmits the packet later writes the checksum at
csum_start + csum_offset.  This tool plays the guest: it attaches to an
existing tap with IFF_VNET_HDR and writes one UDP/IPv4 datagram with such a
header.

  vnet_send.py TAP SRC_MAC SRC_IP DST_IP DPORT --token T
               (--honest | --rewrite-port PORT)

  --honest             csum_start is the UDP header, csum_offset 6 (the UDP
                       checksum field, which holds the pseudo-header sum, as
                       a guest's stack leaves it): the host completes a valid
                       checksum, and the datagram goes to DPORT
  --rewrite-port PORT  csum_offset 2 (the destination port) and two payload
                       bytes chosen so that the checksum the host writes
                       there is PORT: the datagram leaves for PORT, which
                       latch never saw (UDP checksum 0: none)

The payload is "TOKEN " and two adjustment bytes.  Exit 0 once written.
"""
import argparse
import fcntl
import os
import socket
import struct
import sys

TUNSETIFF = 0x400454CA
IFF_TAP, IFF_NO_PI, IFF_VNET_HDR = 0x0002, 0x1000, 0x4000
VIRTIO_NET_HDR_F_NEEDS_CSUM = 1
ETH_HLEN, IP_HLEN = 14, 20


def csum_add(a, b):
    s = a + b
    return (s & 0xFFFF) + (s >> 16)


def sum16(data):
    """Ones' complement sum of big-endian 16-bit words (the order does not matter to the result)."""
    if len(data) % 2:
        data += b"\0"
    s = 0
    for (w,) in struct.iter_unpack("!H", data):
        s = csum_add(s, w)
    return s


def main():
    p = argparse.ArgumentParser()
    for name in ("tap", "src_mac", "src_ip", "dst_ip"):
        p.add_argument(name)
    p.add_argument("dport", type=int)
    p.add_argument("--token", required=True)
    mode = p.add_mutually_exclusive_group(required=True)
    mode.add_argument("--honest", action="store_true")
    mode.add_argument("--rewrite-port", type=int)
    a = p.parse_args()

    dst_mac = open("/sys/class/net/%s/address" % a.tap).read().strip()
    src, dst = socket.inet_aton(a.src_ip), socket.inet_aton(a.dst_ip)
    head = (a.token + " ").encode()
    if len(head) % 2:  # the adjustment word on an even offset
        head += b" "
    payload = head + b"\0\0"
    udp_len = 8 + len(payload)
    pseudo = sum16(src + dst + struct.pack("!BBH", 0, 17, udp_len))
    if a.honest:
        # what a guest's stack leaves for the device: the folded pseudo-header sum
        udp = struct.pack("!HHHH", 40000, a.dport, udp_len, pseudo)
        start, offset = ETH_HLEN + IP_HLEN, 6
    else:
        udp = struct.pack("!HHHH", 40000, a.dport, udp_len, 0)
        start, offset = ETH_HLEN + IP_HLEN, 2
        # the host writes ~sum(udp + payload) at the port: make that sum ~PORT
        want = 0xFFFF - a.rewrite_port
        adj = csum_add(want, 0xFFFF - sum16(udp + payload))
        payload = payload[:-2] + struct.pack("!H", adj)
        got = 0xFFFF - sum16(udp + payload)
        if got != a.rewrite_port:
            sys.exit("vnet_send: adjustment failed (%d)" % got)
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, IP_HLEN + udp_len, 1, 0, 64, 17, 0, src, dst)
    ip = ip[:10] + struct.pack("!H", 0xFFFF - sum16(ip)) + ip[12:]
    eth = bytes.fromhex(dst_mac.replace(":", "")) + bytes.fromhex(a.src_mac.replace(":", "")) + b"\x08\x00"
    # struct virtio_net_hdr, little-endian (virtio 1.0): flags, gso_type, hdr_len, gso_size, csum_start, csum_offset
    vhdr = struct.pack("<BBHHHH", VIRTIO_NET_HDR_F_NEEDS_CSUM, 0, 0, 0, start, offset)

    fd = os.open("/dev/net/tun", os.O_RDWR)
    fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH", a.tap.encode(), IFF_TAP | IFF_NO_PI | IFF_VNET_HDR))
    os.write(fd, vhdr + eth + ip + udp + payload)
    os.close(fd)
    return 0


if __name__ == "__main__":
    sys.exit(main())
