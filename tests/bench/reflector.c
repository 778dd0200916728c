/* The wire benchmark's ceiling: a switch that costs nothing.
 *
 * reflector IN OUT: every frame received on interface IN leaves unchanged on OUT, up to 64
 * per recvmmsg/sendmmsg. Put in the switch's place, it shows the packet rate that the
 * sender, the receiver, the veth links and the kernel allow on this machine, i.e. the most
 * any switch can be measured at with tests/bench/traffic.c (or traffic.py) here.
 * Built by tests/bench/wire.py with the system C compiler when one is installed.
 */
#define _GNU_SOURCE
#include "rawport.h"
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#define BATCH 64
#define SLOT 2048

int main(int argc, char **argv) {
    static char buf[BATCH][SLOT];
    struct mmsghdr msgs[BATCH];
    struct iovec iov[BATCH];
    struct pollfd pfd;
    int in, out, i, n;
    if (argc != 3) {
        fprintf(stderr, "usage: reflector IN_IFACE OUT_IFACE\n");
        return 2;
    }
    in = open_port(argv[1]);
    out = open_port(argv[2]);
    if (in < 0 || out < 0) {
        perror("reflector: cannot open an interface");
        return 1;
    }
    memset(msgs, 0, sizeof msgs);
    for (i = 0; i < BATCH; i++) {
        iov[i].iov_base = buf[i];
        msgs[i].msg_hdr.msg_iov = &iov[i];
        msgs[i].msg_hdr.msg_iovlen = 1;
    }
    pfd.fd = in;
    pfd.events = POLLIN;
    printf("ready\n");
    fflush(stdout);
    for (;;) {
        for (i = 0; i < BATCH; i++) iov[i].iov_len = SLOT;
        n = recvmmsg(in, msgs, BATCH, MSG_DONTWAIT, NULL);
        if (n <= 0) {
            poll(&pfd, 1, 100);
            continue;
        }
        for (i = 0; i < n; i++) iov[i].iov_len = msgs[i].msg_len;
        sendmmsg(out, msgs, (unsigned)n, 0);
    }
}
