/* Helpers every host packet loop in C shares (native_window.c, netreduce's native_ps.c and
 * native_ring.c, ATP's native_ps.c, consensus' native_replica.c): big-endian fields of the
 * INC header, a monotonic clock, and the parameter servers' batched send.
 * hosts/transport/native_window.py's library() puts this text in place of the line
 * `#include "native_bytes.h"` before it compiles a loop, so the build cache's hash covers it. */
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

static inline double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static inline void put16(uint8_t *p, uint32_t v) { p[0] = v >> 8; p[1] = v; }
static inline void put32(uint8_t *p, uint32_t v) {
    p[0] = v >> 24; p[1] = v >> 16; p[2] = v >> 8; p[3] = v;
}
static inline uint32_t get32(const uint8_t *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

#ifndef SEND_BATCH
#define SEND_BATCH 64
#endif

/* Send the n datagrams queued in `out` (`slot` bytes apart; datagram i is len_of(out_i, i,
 * ctx) bytes long, to to[i]) with sendmmsg, SEND_BATCH at a time. A socket still full after
 * 50 ms loses the datagram at its head; a peer's ICMP error (refused, unreachable) loses
 * that one datagram; any other error returns -1 with *err set to errno. */
static inline int send_datagrams(int fd, const uint8_t *out, size_t slot,
                                  struct sockaddr_in *to, int64_t n,
                                  uint32_t (*len_of)(const uint8_t *, int64_t, const void *),
                                  const void *ctx, int64_t *err) {
    struct mmsghdr m[SEND_BATCH];
    struct iovec iov[SEND_BATCH];
    int64_t off = 0;
    while (off < n) {
        int k = 0;
        for (; k < SEND_BATCH && off + k < n; k++) {
            const uint8_t *d = out + (size_t)(off + k) * slot;
            iov[k].iov_base = (void *)d;
            iov[k].iov_len = len_of(d, off + k, ctx);
            memset(&m[k], 0, sizeof m[k]);
            m[k].msg_hdr.msg_name = &to[off + k];
            m[k].msg_hdr.msg_namelen = sizeof to[off + k];
            m[k].msg_hdr.msg_iov = &iov[k];
            m[k].msg_hdr.msg_iovlen = 1;
        }
        int r = sendmmsg(fd, m, (unsigned)k, 0);
        if (r > 0) { off += r; continue; }
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            struct pollfd p = {.fd = fd, .events = POLLOUT};
            if (poll(&p, 1, 50) <= 0) off++; /* still full: this datagram is lost */
            continue;
        }
        if (errno == ECONNREFUSED || errno == ENETUNREACH || errno == EHOSTUNREACH) { off++; continue; }
        *err = errno;
        return -1;
    }
    return 0;
}
