/* The replica's request path in C: hosts/consensus/replica.py's Replica.on_request and the
 * in-order case of Replica.sequenced, one for one, over the replica's request socket read
 * with recvmmsg and answered with sendmmsg. hosts/consensus/native_replica.py drives it.
 *
 * A pump (rep_pump) reads the datagrams queued on the socket; rep_serve pumps and waits in
 * poll until a timer of Python's is due or a control datagram comes. Each goes through the checks
 * of on_request in its order: a request frame (length, op CONSENSUS, the job, no RESULT
 * flag, every slot), then its sender: the client's own address and port (under a host
 * sequencer, a numbered request only from the leader's) or it is dropped and counted
 * (dropped_sender). A request that is next in order, in the replica's session, while Python
 * says the in-order path applies (`fast`: no view change or copy under way, nothing pending,
 * no decision or promise at or past the next sequence number) is taken here: the entry goes
 * to `rec` for Python to append to its log, the answer to the client is queued, and under a
 * host sequencer the leader numbers a client's request and queues a copy to each follower.
 * The first request that is not in order goes to Python with every datagram after it
 * (kind SLOW), in order, and the pump stops reading: Python's on_request handles them with
 * the state the taken ones left. The queued frames go out with sendmmsg after each batch; a
 * full send buffer drops the rest of the batch (send_drops), as Python's sendto does: the
 * client asks again and a follower fills the gap from the leader.
 *
 * Constants of the frame (op, flags, slot count, header length) come from Python
 * (wire/header.py); the layout of the 24-byte INC header is checked there against this
 * file's rep_header_len().
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
#include "native_bytes.h"

#define HDR 24
#define BATCH 64
#define SLOT 2048 /* a datagram's room; on_request reads no byte past the request's */
#define MAX_CLIENTS 256 /* worker_id is one byte */
#define MAX_FOLLOWERS 15
#define MAX_DATA_BYTES 1020 /* room per entry in rec (Python checks MAX_DATA fits) */

enum { IGNORED = 0, TAKEN = 1, SLOW = 2 };

struct rep_ctx {
    int64_t fd, job_id, port, op, result_flag, fallback_flag, slots, host_session;
    int64_t host_sequencer; /* no group: the leader numbers the clients' requests */
    int64_t leader_ip;      /* the leader's IPv4 (network order as read); -1: none */
    /* state, from Python before each pump and back after it */
    int64_t fast, leader, session, next_seq, host_seq, bitmap, log_len;
    /* what a pump did */
    int64_t received, taken, first_slow, requests, dropped_sender, send_drops, heard, sent;
    int64_t n_followers;
    int64_t clients[MAX_CLIENTS]; /* worker -> IPv4 (network order as read); -1: none */
    int64_t followers[MAX_FOLLOWERS];
    int64_t cap, max_data;
    uint8_t *buf;   /* cap x SLOT: the datagrams read */
    int64_t *lens;  /* cap */
    int64_t *ips;   /* cap: the sender's IPv4 */
    int64_t *ports; /* cap: the sender's port */
    int64_t *kinds; /* cap: IGNORED, TAKEN or SLOW */
    uint8_t *rec;   /* taken entries: worker, psn, size (uint32, host order), max_data bytes */
    /* frames to send after the batch */
    uint8_t *out;
    struct sockaddr_in *out_to;
    int64_t n_out, cap_out;
};

int64_t rep_header_len(void) { return HDR; }
int64_t rep_record_len(void) { return 12 + MAX_DATA_BYTES; }
int64_t rep_slot_len(void) { return SLOT; }

void rep_free(struct rep_ctx *x) {
    if (!x) return;
    free(x->buf); free(x->lens); free(x->ips); free(x->ports); free(x->kinds);
    free(x->rec); free(x->out); free(x->out_to);
    free(x);
}

struct rep_ctx *rep_new(int64_t cap) {
    struct rep_ctx *x = calloc(1, sizeof *x);
    if (!x) return NULL;
    x->cap = cap;
    x->cap_out = BATCH * (MAX_FOLLOWERS + 1);
    x->buf = malloc((size_t)cap * SLOT);
    x->lens = calloc((size_t)cap, sizeof(int64_t));
    x->ips = calloc((size_t)cap, sizeof(int64_t));
    x->ports = calloc((size_t)cap, sizeof(int64_t));
    x->kinds = calloc((size_t)cap, sizeof(int64_t));
    x->rec = malloc((size_t)cap * (size_t)rep_record_len());
    x->out = malloc((size_t)x->cap_out * SLOT);
    x->out_to = calloc((size_t)x->cap_out, sizeof(struct sockaddr_in));
    if (!x->buf || !x->lens || !x->ips || !x->ports || !x->kinds || !x->rec || !x->out ||
        !x->out_to) {
        rep_free(x);
        return NULL;
    }
    for (int i = 0; i < MAX_CLIENTS; i++) x->clients[i] = -1;
    return x;
}

static size_t request_len(const struct rep_ctx *x) { return HDR + 4 * (size_t)x->slots; }

/* the header of a frame the replica sends (wire/header.py's layout; reserved bits 0) */
static void put_header(uint8_t *p, const struct rep_ctx *x, uint32_t flags, uint32_t worker,
                       uint32_t psn, uint32_t idx, uint32_t epoch, uint32_t bitmap) {
    p[0] = (uint8_t)x->op;
    p[1] = (uint8_t)flags;
    put16(p + 2, (uint32_t)x->job_id);
    p[4] = (uint8_t)worker;
    p[5] = 0;
    p[6] = (uint8_t)x->slots;
    p[7] = 0;
    put32(p + 8, psn);
    put32(p + 12, idx);
    put32(p + 16, epoch);
    put32(p + 20, bitmap);
}

static uint8_t *queue(struct rep_ctx *x, int64_t ip) {
    uint8_t *p = x->out + (size_t)x->n_out * SLOT;
    struct sockaddr_in *to = &x->out_to[x->n_out++];
    to->sin_family = AF_INET;
    to->sin_port = htons((uint16_t)x->port);
    to->sin_addr.s_addr = (uint32_t)ip;
    return p;
}

/* sendmmsg of the queued frames; what the kernel does not take is dropped */
static void flush(struct rep_ctx *x) {
    struct mmsghdr m[BATCH * (MAX_FOLLOWERS + 1)];
    struct iovec v[BATCH * (MAX_FOLLOWERS + 1)];
    size_t len = request_len(x);
    for (int64_t i = 0; i < x->n_out; i++) {
        v[i].iov_base = x->out + (size_t)i * SLOT;
        v[i].iov_len = len;
        memset(&m[i].msg_hdr, 0, sizeof m[i].msg_hdr);
        m[i].msg_hdr.msg_name = &x->out_to[i];
        m[i].msg_hdr.msg_namelen = sizeof x->out_to[i];
        m[i].msg_hdr.msg_iov = &v[i];
        m[i].msg_hdr.msg_iovlen = 1;
    }
    int64_t off = 0;
    while (off < x->n_out) {
        int r = sendmmsg((int)x->fd, m + off, (unsigned)(x->n_out - off), MSG_DONTWAIT);
        if (r > 0) {
            off += r;
            x->sent += r;
        } else if (r < 0 && errno == EINTR) {
            continue;
        } else if (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != ENOBUFS) {
            off += 1; /* this datagram's destination failed (unreachable): as lost */
            x->send_drops += 1;
        } else {
            x->send_drops += x->n_out - off; /* a full send buffer: as lost */
            break;
        }
    }
    x->n_out = 0;
}

/* the entry at the next sequence number: logged (rec), answered to its client */
static void take(struct rep_ctx *x, const uint8_t *p, uint32_t worker, uint32_t psn) {
    uint32_t size = get32(p + HDR);
    if (size > (uint32_t)x->max_data) size = (uint32_t)x->max_data;
    /* rec's stride: 12 + max_data (<= MAX_DATA_BYTES, checked by native_replica.py) */
    uint8_t *r = x->rec + (size_t)x->taken * (size_t)(12 + x->max_data);
    uint32_t head[3] = {worker, psn, size};
    memcpy(r, head, sizeof head);
    memcpy(r + 12, p + HDR + 4, size);
    x->taken++;
    x->next_seq++;
    x->log_len++;
    int64_t ip = x->clients[worker];
    if (ip < 0) return; /* no client of this replica's: nobody to answer */
    uint8_t *a = queue(x, ip);
    put_header(a, x, (uint32_t)x->result_flag, worker, psn, (uint32_t)(x->log_len - 1),
               (uint32_t)x->session, (uint32_t)x->bitmap);
    memset(a + HDR, 0, request_len(x) - HDR);
}

static int in_order(const struct rep_ctx *x, uint32_t session, uint32_t seq) {
    return x->fast && session == (uint32_t)x->session && seq == (uint32_t)x->next_seq;
}

static int classify(struct rep_ctx *x, int64_t i) {
    const uint8_t *p = x->buf + (size_t)i * SLOT;
    if ((size_t)x->lens[i] < request_len(x)) return IGNORED;
    uint32_t flags = p[1], worker = p[4];
    uint32_t job = (uint32_t)p[2] << 8 | p[3];
    if (p[0] != x->op || job != (uint32_t)x->job_id || (flags & (uint32_t)x->result_flag) ||
        p[6] != x->slots)
        return IGNORED;
    uint32_t psn = get32(p + 8), seq = get32(p + 12), session = get32(p + 16);
    int64_t sender = x->host_sequencer && seq != 0 ? x->leader_ip : x->clients[worker];
    if (sender < 0 || x->ips[i] != sender || x->ports[i] != x->port) {
        x->dropped_sender++;
        return IGNORED;
    }
    if (x->host_sequencer && seq == 0) {
        if (!x->leader) return IGNORED;
        if (!in_order(x, (uint32_t)x->host_session, (uint32_t)x->host_seq + 1)) return SLOW;
        x->host_seq++;
        for (int64_t f = 0; f < x->n_followers; f++) {
            uint8_t *c = queue(x, x->followers[f]);
            memcpy(c, p, request_len(x));
            put_header(c, x, (uint32_t)x->fallback_flag, worker, psn, (uint32_t)x->host_seq,
                       (uint32_t)x->host_session, 0);
        }
        take(x, p, worker, psn);
        return TAKEN;
    }
    if (seq == 0) return IGNORED;
    if (!in_order(x, session, seq)) return SLOW;
    x->requests++;
    if (x->host_sequencer) x->heard = 1;
    take(x, p, worker, psn);
    return TAKEN;
}

/* read and handle what is queued; stops at a datagram for Python, or with cap nearly used */
static void drain(struct rep_ctx *x) {
    struct mmsghdr m[BATCH];
    struct iovec v[BATCH];
    struct sockaddr_in from[BATCH];
    while (x->first_slow < 0 && x->received + BATCH <= x->cap) {
        for (int i = 0; i < BATCH; i++) {
            v[i].iov_base = x->buf + (size_t)(x->received + i) * SLOT;
            v[i].iov_len = SLOT;
            memset(&m[i].msg_hdr, 0, sizeof m[i].msg_hdr);
            m[i].msg_hdr.msg_name = &from[i];
            m[i].msg_hdr.msg_namelen = sizeof from[i];
            m[i].msg_hdr.msg_iov = &v[i];
            m[i].msg_hdr.msg_iovlen = 1;
        }
        int r = recvmmsg((int)x->fd, m, BATCH, MSG_DONTWAIT, NULL);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return; /* drained (EAGAIN), or an error Python's recvfrom would raise */
        for (int i = 0; i < r; i++) {
            int64_t k = x->received + i;
            x->lens[k] = m[i].msg_len;
            x->ips[k] = from[i].sin_addr.s_addr;
            x->ports[k] = ntohs(from[i].sin_port);
            if (x->first_slow >= 0) {
                x->kinds[k] = SLOW;
                continue;
            }
            x->kinds[k] = classify(x, k);
            if (x->kinds[k] == SLOW) x->first_slow = k;
        }
        x->received += r;
        flush(x);
        if (r < BATCH) return;
    }
}

static void reset(struct rep_ctx *x) {
    x->received = x->taken = x->requests = x->dropped_sender = x->send_drops = 0;
    x->heard = x->sent = x->n_out = 0;
    x->first_slow = -1;
}

/* Read and handle what is queued (at most cap datagrams); returns how many were read. */
int64_t rep_pump(struct rep_ctx *x) {
    reset(x);
    drain(x);
    return x->received;
}

/* Serve requests until `deadline` (CLOCK_MONOTONIC seconds, Python's time.monotonic), a
 * datagram on `ctl_fd` (the replicas' control socket: Python's), a request for Python, cap
 * nearly used or a signal (Python's handlers run when this returns); waits in poll, so a
 * replica under load pays no Python per wake-up. Returns how many datagrams were read. */
int64_t rep_serve(struct rep_ctx *x, int64_t ctl_fd, double deadline) {
    reset(x);
    for (;;) {
        drain(x);
        if (x->first_slow >= 0 || x->received + BATCH > x->cap) break;
        double left = deadline - now_s();
        if (left <= 0) break;
        struct pollfd p[2] = {{(int)x->fd, POLLIN, 0}, {(int)ctl_fd, POLLIN, 0}};
        int r = poll(p, 2, (int)(left * 1000.0) + 1);
        if (r <= 0 || p[1].revents || !(p[0].revents & POLLIN)) break;
    }
    return x->received;
}
