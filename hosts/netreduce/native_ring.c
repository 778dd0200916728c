/* One ring all-reduce call of one rank, in C: the event loop of hosts/netreduce/ring.py
 * (RingAllReduce._run, _Call) without per-packet Python, for the host-only baseline to
 * get the same native transport as the switch path (hosts/transport/native_window.c).
 *
 * Same rules as the Python reference, one for one (tests/test_native_window.py compares
 * them under loss, duplication and reordering):
 *   - the rows are cut into n chunks; step t < n-1 sends chunk (rank - t) and adds the
 *     received chunk (rank - t - 1) (reduce-scatter), later steps pass the sums on
 *     (all-gather); a packet received at step t is sent on at step t+1;
 *   - each data packet (step t in agg_idx, packet j in psn, call number in epoch) is
 *     acknowledged by its receiver; acks are batched, (t, j) pairs as values;
 *   - at most `window` packets unacknowledged; a packet is resent (RETX, the same bytes as
 *     first sent) after `timeout`, or at once when FAST_RETX_ACKS later packets were
 *     acknowledged first; after `max_retries` resends of one packet the call fails (1),
 *     after `total_timeout` it fails (2);
 *   - data of the next call (a faster left neighbour) is kept for it in the context, data
 *     of earlier calls is acknowledged again.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include "native_bytes.h"

#define HDR 24
#define OP_AGG_SYNC 1
#define OP_ACK 7
#define FLAG_RETX 0x01
#define FLAG_ACK 0x04
#define BATCH 64
#define SLOT 2048
#define SEND_RETRY_S 0.05

enum { CALL_OK = 0, CALL_RETRIES = 1, CALL_DEADLINE = 2, CALL_SOCKET = 3, CALL_NOMEM = 4 };

/* Persistent per rank: the socket, the neighbours, data kept for the next call. */
struct ring_ctx {
    int fd;
    struct sockaddr_in right, left;
    int64_t rank, n, job_id, slots, window, max_retries, fast_acks, acks_per_datagram;
    double timeout;
    uint8_t *early; /* datagrams of the next call, each SLOT bytes: [len:u16][payload] */
    int64_t n_early, cap_early;
    /* counters (cumulative) */
    int64_t data_sent, retx, fast_retx, acks_sent, duplicates, early_kept, send_drops;
    int64_t err, fail_step, fail_packet, fail_tries;
    int64_t drops[8]; /* by wire.header.HostDrop: what no neighbour of this rank sent */
    /* where the neighbours' datagrams come from (IP in network order, port in host order):
     * their addresses, or a relay's in front of this rank */
    uint32_t from_left_ip, from_left_port, from_right_ip, from_right_port;
};

/* wire.header.HostDrop */
enum { FOREIGN_ADDRESS = 0, FOREIGN_PORT = 1, MALFORMED = 2, OTHER_JOB = 3, FORGED_FLAGS = 4 };

/* RingAllReduce._refuse (ring.py): -1 to take the datagram, else the HostDrop reason. Data
 * come from the left neighbour only, acks from the right one, each of this job and naming
 * that neighbour's rank. */
static int refuse(const struct ring_ctx *x, const struct sockaddr_in *src, const uint8_t *p,
                  size_t len) {
    if (len < HDR || len < HDR + 4 * (size_t)p[6]) return MALFORMED;
    if (((uint32_t)p[2] << 8 | p[3]) != (uint32_t)x->job_id) return OTHER_JOB;
    uint32_t ip, port;
    int64_t rank;
    if (p[0] == OP_AGG_SYNC && (p[1] & ~FLAG_RETX) == 0) {
        ip = x->from_left_ip, port = x->from_left_port;
        rank = (x->rank + x->n - 1) % x->n;
    } else if (p[0] == OP_ACK && p[1] == FLAG_ACK) {
        ip = x->from_right_ip, port = x->from_right_port;
        rank = (x->rank + 1) % x->n;
    } else {
        return FORGED_FLAGS;
    }
    if (src->sin_addr.s_addr != ip) return FOREIGN_ADDRESS;
    if (ntohs(src->sin_port) != port || p[4] != rank) return FOREIGN_PORT;
    return -1;
}

struct ring_ctx *ring_new(int64_t fd, uint32_t right_ip, uint32_t right_port, uint32_t left_ip,
                          uint32_t left_port) {
    struct ring_ctx *x = calloc(1, sizeof *x);
    if (!x) return NULL;
    x->fd = (int)fd;
    x->right.sin_family = x->left.sin_family = AF_INET;
    x->right.sin_addr.s_addr = right_ip;
    x->right.sin_port = htons((uint16_t)right_port);
    x->left.sin_addr.s_addr = left_ip;
    x->left.sin_port = htons((uint16_t)left_port);
    return x;
}

void ring_free(struct ring_ctx *x) {
    if (x) free(x->early);
    free(x);
}


static void header(uint8_t *h, uint32_t op, uint32_t flags, const struct ring_ctx *x, uint32_t cnt,
                   uint32_t psn, uint32_t idx, uint32_t epoch) {
    memset(h, 0, HDR);
    h[0] = (uint8_t)op;
    h[1] = (uint8_t)flags;
    put16(h + 2, (uint32_t)x->job_id);
    h[4] = (uint8_t)x->rank;
    h[6] = (uint8_t)cnt;
    put32(h + 8, psn);
    put32(h + 12, idx);
    put32(h + 16, epoch);
}

/* sendmmsg of n datagrams; a full buffer stalls one datagram SEND_RETRY_S, then drops it. */
static int send_all(struct ring_ctx *x, struct mmsghdr *m, int n) {
    int off = 0, waited = 0;
    while (off < n) {
        int r = sendmmsg(x->fd, m + off, (unsigned)(n - off), 0);
        if (r > 0) { off += r; waited = 0; continue; }
        if (errno == EINTR) continue;
        if ((errno == EAGAIN || errno == EWOULDBLOCK) && !waited) {
            struct pollfd p = {.fd = x->fd, .events = POLLOUT};
            poll(&p, 1, (int)(SEND_RETRY_S * 1000));
            waited = 1;
            continue;
        }
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ECONNREFUSED ||
            errno == ENETUNREACH || errno == EHOSTUNREACH) {
            x->send_drops++;
            off++;
            waited = 0;
            continue;
        }
        x->err = errno;
        return -1;
    }
    return 0;
}

struct call {
    struct ring_ctx *x;
    int32_t *data; /* rows x slots */
    int64_t rows, steps, left, epoch;
    int64_t *bounds;            /* n + 1 */
    int64_t *recv_off, *send_off; /* steps + 1: offsets of each step's packets */
    uint8_t *received;          /* recv_off[steps] */
    uint8_t *payload;           /* send_off[steps] x slots x 4: values as first sent */
    double *sent_at;
    int32_t *tries, *prev, *nxt;
    uint8_t *inflight;
    int64_t head, tail, n_inflight, newer_acks;
    int64_t *ready; /* FIFO of send ids */
    int64_t ready_head, ready_tail;
    /* pending acks: (t, j) pairs per epoch, flushed after each receive batch */
    int32_t *acks;
    uint32_t *ack_epoch;
    int64_t n_acks, cap_acks;
    int linger; /* after the last call: ack data of it or earlier calls, nothing else */
};

static int64_t chunk_len(const struct call *c, int64_t k) { return c->bounds[k + 1] - c->bounds[k]; }
static int64_t send_chunk(const struct call *c, int64_t t) {
    int64_t n = c->x->n, r = c->x->rank;
    return t < n - 1 ? ((r - t) % n + n) % n : ((r + n - t) % n + n) % n;
}
static int64_t recv_chunk(const struct call *c, int64_t t) {
    int64_t n = c->x->n;
    return ((send_chunk(c, t) - 1) % n + n) % n;
}

static void unlink_(struct call *c, int64_t i) {
    if (c->prev[i] >= 0) c->nxt[c->prev[i]] = c->nxt[i]; else c->head = c->nxt[i];
    if (c->nxt[i] >= 0) c->prev[c->nxt[i]] = c->prev[i]; else c->tail = c->prev[i];
}
static void append(struct call *c, int64_t i) {
    c->prev[i] = (int32_t)c->tail;
    c->nxt[i] = -1;
    if (c->tail >= 0) c->nxt[c->tail] = (int32_t)i; else c->head = i;
    c->tail = i;
}

static int64_t step_of(const int64_t *off, int64_t steps, int64_t id) {
    int64_t t = 0;
    while (t + 1 < steps && off[t + 1] <= id) t++;
    return t;
}

static int add_ack(struct call *c, uint32_t epoch, int64_t t, int64_t j) {
    if (c->n_acks == c->cap_acks) {
        int64_t cap = c->cap_acks ? 2 * c->cap_acks : 256;
        int32_t *a = realloc(c->acks, (size_t)cap * 2 * sizeof *a);
        if (!a) return -1;
        c->acks = a;
        uint32_t *e = realloc(c->ack_epoch, (size_t)cap * sizeof *e);
        if (!e) return -1;
        c->ack_epoch = e;
        c->cap_acks = cap;
    }
    c->acks[2 * c->n_acks] = (int32_t)t;
    c->acks[2 * c->n_acks + 1] = (int32_t)j;
    c->ack_epoch[c->n_acks++] = epoch;
    return 0;
}

/* Acks go to the left neighbour, grouped by epoch in order of first appearance. */
static int flush_acks(struct call *c) {
    struct ring_ctx *x = c->x;
    int64_t per = x->acks_per_datagram, done = 0;
    static __thread uint8_t buf[BATCH][SLOT];
    struct mmsghdr m[BATCH];
    struct iovec iov[BATCH];
    uint8_t *used = calloc((size_t)c->n_acks + 1, 1);
    if (!used) return -1;
    int k = 0;
    while (done < c->n_acks) {
        int64_t first = 0;
        while (used[first]) first++;
        uint32_t epoch = c->ack_epoch[first];
        int64_t cnt = 0;
        uint8_t *b = buf[k];
        for (int64_t i = first; i < c->n_acks && cnt < per; i++) {
            if (used[i] || c->ack_epoch[i] != epoch) continue;
            put32(b + HDR + 8 * cnt, (uint32_t)c->acks[2 * i]);
            put32(b + HDR + 8 * cnt + 4, (uint32_t)c->acks[2 * i + 1]);
            used[i] = 1;
            cnt++;
            done++;
        }
        header(b, OP_ACK, FLAG_ACK, x, (uint32_t)(2 * cnt), 0, 0, epoch);
        iov[k].iov_base = b;
        iov[k].iov_len = HDR + 8 * (size_t)cnt;
        memset(&m[k], 0, sizeof m[k]);
        m[k].msg_hdr.msg_name = &x->left;
        m[k].msg_hdr.msg_namelen = sizeof x->left;
        m[k].msg_hdr.msg_iov = &iov[k];
        m[k].msg_hdr.msg_iovlen = 1;
        if (++k == BATCH || done == c->n_acks) {
            x->acks_sent += k;
            if (send_all(x, m, k) < 0) { free(used); return -1; }
            k = 0;
        }
    }
    free(used);
    c->n_acks = 0;
    return 0;
}

static int keep_early(struct ring_ctx *x, const uint8_t *p, size_t len) {
    if (len + 2 > SLOT) return 0;
    if (x->n_early == x->cap_early) {
        int64_t cap = x->cap_early ? 2 * x->cap_early : 64;
        uint8_t *e = realloc(x->early, (size_t)cap * SLOT);
        if (!e) return -1;
        x->early = e;
        x->cap_early = cap;
    }
    uint8_t *d = x->early + (size_t)x->n_early++ * SLOT;
    put16(d, (uint32_t)len);
    memcpy(d + 2, p, len);
    return 0;
}

/* One data packet of this call from the left neighbour (_Call.deliver); acked if sized. */
static int on_data(struct call *c, const uint8_t *p, int ack) {
    struct ring_ctx *x = c->x;
    if (p[6] != (uint8_t)x->slots) return 0; /* another slot count: ignored, not acked */
    int64_t t = get32(p + 12), j = get32(p + 8);
    if (t < c->steps && j < c->recv_off[t + 1] - c->recv_off[t]) {
        int64_t id = c->recv_off[t] + j;
        if (!c->received[id]) {
            c->received[id] = 1;
            c->left--;
            int64_t row = c->bounds[recv_chunk(c, t)] + j;
            int32_t *d = c->data + (size_t)row * (size_t)x->slots;
            const uint8_t *v = p + HDR;
            if (t < x->n - 1)
                for (int64_t k = 0; k < x->slots; k++) d[k] = (int32_t)((uint32_t)d[k] + get32(v + 4 * k));
            else
                for (int64_t k = 0; k < x->slots; k++) d[k] = (int32_t)get32(v + 4 * k);
            if (t + 1 < c->steps) c->ready[c->ready_tail++] = c->send_off[t + 1] + j;
        } else {
            x->duplicates++;
        }
    } else {
        x->duplicates++;
    }
    return ack ? add_ack(c, (uint32_t)c->epoch, t, j) : 0;
}

static void on_ack(struct call *c, int64_t t, int64_t j) {
    if (t < 0 || t >= c->steps || j < 0 || j >= c->send_off[t + 1] - c->send_off[t]) return;
    int64_t id = c->send_off[t] + j;
    if (!c->inflight[id]) return;
    if (id == c->head) c->newer_acks = 0; else c->newer_acks++;
    c->inflight[id] = 0;
    unlink_(c, id);
    c->n_inflight--;
}

static int receive(struct call *c) {
    struct ring_ctx *x = c->x;
    static __thread uint8_t buf[BATCH][SLOT];
    struct mmsghdr m[BATCH];
    struct iovec iov[BATCH];
    struct sockaddr_in src[BATCH];
    for (;;) {
        for (int k = 0; k < BATCH; k++) {
            iov[k].iov_base = buf[k];
            iov[k].iov_len = SLOT;
            memset(&m[k].msg_hdr, 0, sizeof m[k].msg_hdr);
            m[k].msg_hdr.msg_iov = &iov[k];
            m[k].msg_hdr.msg_iovlen = 1;
            m[k].msg_hdr.msg_name = &src[k];
            m[k].msg_hdr.msg_namelen = sizeof src[k];
        }
        int r = recvmmsg(x->fd, m, BATCH, MSG_DONTWAIT, NULL);
        if (r < 0) {
            if (errno == EINTR || errno == ECONNREFUSED) continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) break;
            x->err = errno;
            return -1;
        }
        for (int k = 0; k < r; k++) {
            const uint8_t *p = buf[k];
            size_t len = m[k].msg_len;
            int why = refuse(x, &src[k], p, len);
            if (why >= 0) {
                x->drops[why]++;
                continue;
            }
            uint32_t epoch = get32(p + 16);
            int32_t dist = (int32_t)(epoch - (uint32_t)c->epoch);
            if (c->linger) {
                if (p[0] == OP_AGG_SYNC && dist <= 0 && add_ack(c, epoch, get32(p + 12), get32(p + 8)) < 0)
                    return -1;
                continue;
            }
            if (p[0] == OP_ACK && dist == 0) {
                for (int64_t i = 0; i + 1 < p[6]; i += 2)
                    on_ack(c, (int32_t)get32(p + HDR + 4 * i), (int32_t)get32(p + HDR + 4 * i + 4));
            } else if (p[0] == OP_AGG_SYNC) {
                if (dist == 0) {
                    if (on_data(c, p, 1) < 0) return -1;
                } else {
                    if (dist == 1) {
                        if (keep_early(x, p, len) < 0) return -1;
                        x->early_kept++;
                    }
                    if (add_ack(c, epoch, get32(p + 12), get32(p + 8)) < 0) return -1;
                }
            }
        }
        if (r < BATCH) break;
    }
    return c->n_acks ? flush_acks(c) : 0;
}

static void build(struct call *c, uint8_t *h, int64_t id, int retx) {
    struct ring_ctx *x = c->x;
    int64_t t = step_of(c->send_off, c->steps, id), j = id - c->send_off[t];
    header(h, OP_AGG_SYNC, retx ? FLAG_RETX : 0, x, (uint32_t)x->slots, (uint32_t)j, (uint32_t)t,
           (uint32_t)c->epoch);
}

/* Resend what fell due (oldest first), then send ready packets while the window allows. */
static int send_round(struct call *c, double now, int *fail) {
    struct ring_ctx *x = c->x;
    static __thread uint8_t hdr[BATCH][HDR];
    struct mmsghdr m[BATCH];
    struct iovec iov[2 * BATCH];
    size_t vbytes = (size_t)x->slots * 4;
    int k = 0;
    for (;;) {
        int64_t id = -1;
        int retx = 0;
        if (c->head >= 0) {
            int fast = c->newer_acks >= x->fast_acks;
            if (now - c->sent_at[c->head] >= x->timeout || fast) {
                id = c->head;
                retx = 1;
                if (c->tries[id] >= x->max_retries) {
                    int64_t t = step_of(c->send_off, c->steps, id);
                    x->fail_step = t;
                    x->fail_packet = id - c->send_off[t];
                    x->fail_tries = c->tries[id];
                    *fail = 1;
                    return 0;
                }
                c->tries[id]++;
                unlink_(c, id);
                append(c, id);
                c->newer_acks = 0;
                x->retx++;
                x->fast_retx += fast;
            }
        }
        if (id < 0 && c->ready_head < c->ready_tail && c->n_inflight < x->window) {
            id = c->ready[c->ready_head++];
            int64_t t = step_of(c->send_off, c->steps, id), j = id - c->send_off[t];
            int64_t row = c->bounds[send_chunk(c, t)] + j;
            uint8_t *v = c->payload + (size_t)id * vbytes;
            const int32_t *d = c->data + (size_t)row * (size_t)x->slots;
            for (int64_t q = 0; q < x->slots; q++) put32(v + 4 * q, (uint32_t)d[q]);
            c->tries[id] = 0;
            c->inflight[id] = 1;
            c->n_inflight++;
            append(c, id);
        }
        if (id >= 0) {
            c->sent_at[id] = now;
            build(c, hdr[k], id, retx);
            iov[2 * k].iov_base = hdr[k];
            iov[2 * k].iov_len = HDR;
            iov[2 * k + 1].iov_base = c->payload + (size_t)id * vbytes;
            iov[2 * k + 1].iov_len = vbytes;
            memset(&m[k], 0, sizeof m[k]);
            m[k].msg_hdr.msg_name = &x->right;
            m[k].msg_hdr.msg_namelen = sizeof x->right;
            m[k].msg_hdr.msg_iov = &iov[2 * k];
            m[k].msg_hdr.msg_iovlen = 2;
            k++;
        }
        if (k && (k == BATCH || id < 0)) {
            x->data_sent += k;
            if (send_all(x, m, k) < 0) return -1;
            k = 0;
        }
        if (id < 0) return 0;
    }
}

/* One call: data (rows x slots, native int32) is replaced by the ring's sum.
 * missing_rows (rows bytes) is set for rows not fully received when the call fails. */
int ring_allreduce(struct ring_ctx *x, int32_t *data, int64_t rows, int64_t epoch,
                   double total_timeout, uint8_t *missing_rows) {
    struct call c;
    int rc = CALL_NOMEM, fail = 0;
    int64_t n = x->n;
    memset(&c, 0, sizeof c);
    c.x = x;
    c.data = data;
    c.rows = rows;
    c.epoch = epoch;
    c.steps = 2 * (n - 1);
    c.head = c.tail = -1;
    c.bounds = malloc((size_t)(n + 1) * sizeof *c.bounds);
    c.recv_off = malloc((size_t)(c.steps + 1) * sizeof *c.recv_off);
    c.send_off = malloc((size_t)(c.steps + 1) * sizeof *c.send_off);
    if (!c.bounds || !c.recv_off || !c.send_off) goto out;
    for (int64_t k = 0; k <= n; k++) c.bounds[k] = rows * k / n;
    c.recv_off[0] = c.send_off[0] = 0;
    for (int64_t t = 0; t < c.steps; t++) {
        c.recv_off[t + 1] = c.recv_off[t] + chunk_len(&c, recv_chunk(&c, t));
        c.send_off[t + 1] = c.send_off[t] + chunk_len(&c, send_chunk(&c, t));
    }
    int64_t nr = c.recv_off[c.steps], ns = c.send_off[c.steps];
    c.left = nr;
    c.received = calloc((size_t)nr + 1, 1);
    c.payload = malloc((size_t)ns * (size_t)x->slots * 4 + 1);
    c.sent_at = malloc(((size_t)ns + 1) * sizeof *c.sent_at);
    c.tries = malloc(((size_t)ns + 1) * sizeof *c.tries);
    c.prev = malloc(((size_t)ns + 1) * sizeof *c.prev);
    c.nxt = malloc(((size_t)ns + 1) * sizeof *c.nxt);
    c.inflight = calloc((size_t)ns + 1, 1);
    c.ready = malloc(((size_t)ns + 1) * sizeof *c.ready);
    if (!c.received || !c.payload || !c.sent_at || !c.tries || !c.prev || !c.nxt || !c.inflight ||
        !c.ready)
        goto out;
    if (c.steps)
        for (int64_t j = 0; j < chunk_len(&c, x->rank); j++) c.ready[c.ready_tail++] = j;
    /* data of this call that arrived during the last one (not acked again: it was) */
    int64_t kept = x->n_early;
    x->n_early = 0;
    for (int64_t i = 0; i < kept; i++) {
        const uint8_t *d = x->early + (size_t)i * SLOT;
        if (get32(d + 2 + 16) == (uint32_t)epoch && on_data(&c, d + 2, 0) < 0) goto out;
    }
    double deadline = now_s() + total_timeout;
    while (c.left || c.ready_head < c.ready_tail || c.n_inflight) {
        double now = now_s();
        if (send_round(&c, now, &fail) < 0) { rc = CALL_SOCKET; goto out; }
        if (fail) { rc = CALL_RETRIES; goto out; }
        if (now >= deadline) { rc = CALL_DEADLINE; goto out; }
        double wait = deadline - now;
        if (c.head >= 0 && c.sent_at[c.head] + x->timeout - now < wait)
            wait = c.sent_at[c.head] + x->timeout - now;
        if (wait < 0) wait = 0;
        struct timespec ts = {.tv_sec = (time_t)wait,
                              .tv_nsec = (long)((wait - (double)(time_t)wait) * 1e9)};
        struct pollfd p = {.fd = x->fd, .events = POLLIN};
        int r = ppoll(&p, 1, &ts, NULL);
        if (r < 0 && errno != EINTR) { x->err = errno; rc = CALL_SOCKET; goto out; }
        if (r > 0 && receive(&c) < 0) { rc = x->err ? CALL_SOCKET : CALL_NOMEM; goto out; }
    }
    rc = CALL_OK;
out:
    if (rc != CALL_OK && missing_rows && c.received && c.recv_off)
        for (int64_t t = 0; t < c.steps; t++)
            for (int64_t j = 0; j < c.recv_off[t + 1] - c.recv_off[t]; j++)
                if (!c.received[c.recv_off[t] + j]) missing_rows[c.bounds[recv_chunk(&c, t)] + j] = 1;
    free(c.bounds); free(c.recv_off); free(c.send_off); free(c.received); free(c.payload);
    free(c.sent_at); free(c.tries); free(c.prev); free(c.nxt); free(c.inflight); free(c.ready);
    free(c.acks); free(c.ack_epoch);
    return rc;
}

/* After the last call: acknowledge late data of this or earlier calls for `seconds`. */
int ring_linger(struct ring_ctx *x, int64_t last_epoch, double seconds) {
    struct call c;
    memset(&c, 0, sizeof c);
    c.x = x;
    c.epoch = last_epoch;
    c.linger = 1;
    double end = now_s() + seconds;
    int rc = 0;
    for (;;) {
        double wait = end - now_s();
        if (wait <= 0) break;
        struct timespec ts = {.tv_sec = (time_t)wait,
                              .tv_nsec = (long)((wait - (double)(time_t)wait) * 1e9)};
        struct pollfd p = {.fd = x->fd, .events = POLLIN};
        if (ppoll(&p, 1, &ts, NULL) > 0 && receive(&c) < 0) { rc = -1; break; }
    }
    x->n_early = 0;
    free(c.acks); free(c.ack_epoch);
    return rc;
}
