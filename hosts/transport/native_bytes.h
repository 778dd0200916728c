/* Helpers every host packet loop in C shares (native_window.c, netreduce's native_ps.c and
 * native_ring.c, ATP's native_ps.c, consensus' native_replica.c): big-endian fields of the
 * INC header, a monotonic clock, and the parameter servers' batched receive and send.
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

/* Receive up to n datagrams waiting on fd into buf (`slot` bytes apart), with recvmmsg
 * through the caller's m and iov (n entries each; with src, the senders go there). Their
 * count (0: none waiting; m[k].msg_len is each one's length), or -1 with *err = errno. */
static inline int recv_datagrams(int fd, uint8_t *buf, size_t slot, struct mmsghdr *m,
                                 struct iovec *iov, struct sockaddr_in *src, int n,
                                 int64_t *err) {
    for (int k = 0; k < n; k++) {
        iov[k].iov_base = buf + (size_t)k * slot;
        iov[k].iov_len = slot;
        memset(&m[k].msg_hdr, 0, sizeof m[k].msg_hdr);
        m[k].msg_hdr.msg_iov = &iov[k];
        m[k].msg_hdr.msg_iovlen = 1;
        if (src != NULL) {
            m[k].msg_hdr.msg_name = &src[k];
            m[k].msg_hdr.msg_namelen = sizeof src[k];
        }
    }
    for (;;) {
        int r = recvmmsg(fd, m, (unsigned)n, MSG_DONTWAIT, NULL);
        if (r >= 0) return r;
        if (errno == EINTR || errno == ECONNREFUSED) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
        *err = errno;
        return -1;
    }
}

/* A parameter server's loop: wait up to max_ms for datagrams (then 0, for the caller to look
 * at its stop flag); take them `batch` at a time into buf (`slot` bytes each), hand each to
 * on_datagram (with its sender when want_src), and after each batch flush what they queued.
 * A socket error: -1 (*err = errno); on_datagram or flush below 0: -2 or -1. */
static inline int serve_datagrams(int fd, int64_t max_ms, uint8_t *buf, size_t slot, int batch,
                                  int want_src,
                                  int (*on_datagram)(void *, uint8_t *, unsigned,
                                                     const struct sockaddr_in *),
                                  int (*flush)(void *), void *ctx, int64_t *err) {
    struct mmsghdr m[batch];
    struct iovec iov[batch];
    struct sockaddr_in src[batch];
    for (;;) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int ready = poll(&p, 1, (int)max_ms);
        if (ready < 0 && errno != EINTR) { *err = errno; return -1; }
        if (ready <= 0) return 0;
        for (;;) {
            int r = recv_datagrams(fd, buf, slot, m, iov, want_src ? src : NULL, batch, err);
            if (r < 0) return -1;
            for (int k = 0; k < r; k++)
                if (on_datagram(ctx, buf + (size_t)k * slot, m[k].msg_len, want_src ? &src[k] : NULL) < 0)
                    return -2;
            if (flush(ctx) < 0) return -1;
            if (r < batch) break;
        }
    }
}
