/* One AF_PACKET raw socket bound to an interface, for the wire benchmark's C programs
 * (reflector.c, traffic.c): every frame of the interface, not those it sent itself, with
 * 16 MiB socket buffers each way. -1 when the interface cannot be opened. */
#ifndef BENCH_RAWPORT_H
#define BENCH_RAWPORT_H

#include <arpa/inet.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <string.h>
#include <sys/socket.h>

#define IGNORE_OUTGOING 23 /* PACKET_IGNORE_OUTGOING, Linux 4.20 */

static int open_port(const char *name) {
    int s = socket(AF_PACKET, SOCK_RAW, htons(ETH_P_ALL));
    struct sockaddr_ll a;
    int one = 1, size = 16 << 20;
    if (s < 0) return -1;
    memset(&a, 0, sizeof a);
    a.sll_family = AF_PACKET;
    a.sll_protocol = htons(ETH_P_ALL);
    a.sll_ifindex = (int)if_nametoindex(name);
    if (a.sll_ifindex == 0 || bind(s, (struct sockaddr *)&a, sizeof a) < 0) return -1;
    setsockopt(s, SOL_PACKET, IGNORE_OUTGOING, &one, sizeof one);
    setsockopt(s, SOL_SOCKET, SO_RCVBUF, &size, sizeof size);
    setsockopt(s, SOL_SOCKET, SO_SNDBUF, &size, sizeof size);
    return s;
}

#endif
