/* One all-reduce call of a worker, in C: the loop of hosts/netreduce/allreduce.py
 * (AllReduceClient._run with sliding_window.SendWindow and ResultAssembler) without
 * per-packet Python.
 *
 * Built on first use by hosts/transport/native_window.py (cbuild: the system C compiler,
 * cached by the source's hash) and called through ctypes with one struct inc_call.
 * Python cuts the vector into big-endian packets (numpy, vectorised); here each packet's
 * 24-byte INC header is written (wire/header.py is the layout; the loader checks
 * INC_HEADER_LEN against it) and sent with its values by sendmmsg, results are read by
 * recvmmsg and scattered into the output rows. The rules are the Python path's, one for
 * one, so both give the same sums (tests/test_native_window.py):
 *   - PSN p goes out only while p < base + window (base: oldest PSN without a result);
 *   - a PSN unanswered for `timeout` is resent with RETX; after `max_retries` resends the
 *     call fails (1); after `total_timeout` seconds it fails (2);
 *   - when fast_retx_results results above the base arrived since the base was last sent,
 *     the base is made due at once (fast retransmission);
 *   - a WAIT answer gives the resend back (the switch held the worker back);
 *   - answers are admitted as hosts/transport/result_filter.py admits them, in the same
 *     order and counted in the same HostDrop cells: from the aggregation address and port,
 *     whole, AGG_SYNC of this job, the worker's flags plus a result's or WAIT (the masks come
 *     from wire/header.py through the call), the job's slot count; duplicates are counted,
 *     not used;
 *   - one first transmission in rtt_probe_every is timed until its result (min RTT);
 *   - addressing: offset + psn % size, or hashed (1) offset + (hash_a * psn + hash_b) % size
 *     with the copy (psn / size) & 1, or ATP's (2, hosts/atp/worker.py, wire.header.atp_index)
 *     offset + (uint32)(hash_b + psn) % size, copy 0;
 *   - with aimd (ATP's window, hosts/atp/worker.py): at most cwnd PSNs in flight, cwnd
 *     + 1/cwnd per result up to `window`, halved (not below 1) when PSNs are resent after
 *     the call's first result, at most once per `timeout` (last_cut carries the time of the
 *     last decrease across calls);
 *     a decrease is taken back when it proves spurious, as AtpClient._undo_if_spurious
 *     does: a result arrives twice, or a resent PSN's result comes sooner than the smallest
 *     round trip after the resend, within UNDO_TIMEOUTS timeouts of the last resend;
 *   - with ecn (the socket has IP_RECVTOS on, hosts/transport/udp.py's enable_ecn): every
 *     datagram's TOS is read, those marked Congestion Experienced are counted (ce_marked)
 *     and, with aimd, halve the window as a timeout does (at most once per `timeout`,
 *     ecn_cuts), a decrease no later result takes back, as AtpClient._receive does.
 * In-flight PSNs are a list ordered by last send time (a resend moves a PSN to the tail, a
 * fast retransmission to the head), so the next deadline is the head's.
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

#define INC_HEADER_LEN 24
#define OP_AGG_SYNC 1
#define FLAG_RETX 0x01
#define FLAG_RESULT 0x02
#define FLAG_WAIT 0x40
#define HOST_DROP_CELLS 8 /* >= wire.header.HOST_DROPS, checked by the loader */
/* wire.header.HostDrop */
enum { FOREIGN_ADDRESS = 0, FOREIGN_PORT = 1, MALFORMED = 2, OTHER_JOB = 3, FORGED_FLAGS = 4,
       BAD_SLOT_COUNT = 5, NOT_A_MEMBER = 6, NOT_IN_FLIGHT = 7, N_HOST_DROPS = 8 };
#define RECV_BATCH 64
/* A datagram, or a run of them the kernel kept whole for us (UDP_GRO: a switch that sends
 * a run of results as one frame with segmentation offload, p4sim's P4SIM_UDP_GSO). */
#define RECV_SLOT 65536
#ifndef UDP_GRO
#define UDP_GRO 104 /* <linux/udp.h> */
#endif
#define SEND_RETRY_S 0.05

enum { CALL_OK = 0, CALL_RETRIES = 1, CALL_DEADLINE = 2, CALL_SOCKET = 3, CALL_NOMEM = 4 };

struct inc_call {
    /* in */
    int64_t fd;
    uint32_t dest_ip;   /* network byte order */
    uint32_t dest_port; /* host byte order */
    int64_t job_id, worker_id, slots, epoch;
    int64_t first_psn, count, window, max_retries;
    int64_t fast_retx_results, rtt_probe_every; /* allreduce.py's FAST_RETX_RESULTS, ... */
    double timeout, total_timeout;
    int64_t offset, size, hashed, hash_a, hash_b;
    int64_t worker_flags, result_flags; /* wire.header.WORKER_FLAGS, RESULT_FLAGS */
    const uint8_t *wire; /* count x slots big-endian int32 */
    int32_t *out;        /* count x slots, native order */
    uint32_t *bitmaps;   /* count */
    uint8_t *have;       /* count */
    /* out */
    int64_t queued, sent, sent_bytes, send_drops, retx, fast_retx, results, dups, waits;
    int64_t received, received_bytes, fail_psn, fail_tries, err;
    double min_rtt; /* < 0: nothing timed */
    int64_t drops[HOST_DROP_CELLS]; /* by wire.header.HostDrop */
    /* in and out: ATP's AIMD window (aimd != 0) */
    int64_t aimd, cuts, undone;
    double cwnd, last_cut;
    double undo, undo_until, rtt_floor; /* < 0: none */
    /* in: read received datagrams' TOS (ECN); out: CE-marked datagrams, cuts they made */
    int64_t ecn, ce_marked, ecn_cuts;
    /* out: runs of datagrams the kernel delivered whole (UDP_GRO), each cut here */
    int64_t gro_runs;
};
#define CMSG_SLOT (2 * CMSG_SPACE(sizeof(int))) /* IP_TOS and UDP_GRO control messages */
#define UNDO_TIMEOUTS 4 /* hosts/atp/worker.py's */

int64_t inc_header_len(void) { return INC_HEADER_LEN; }
int64_t inc_host_drops(void) { return N_HOST_DROPS; }


struct state {
    struct inc_call *c;
    int64_t n, base, next; /* indices into the call's packets */
    double *sent_at, *probe;
    int32_t *tries, *prev, *nxt;
    int64_t *mark;
    uint8_t *inflight;
    int64_t head, tail, results;
    /* the send batch */
    struct mmsghdr *msgs;
    struct iovec *iov;
    uint8_t *hdr;
    int64_t *due;
    struct sockaddr_in dest;
};

static void unlink_(struct state *s, int64_t i) {
    if (s->prev[i] >= 0) s->nxt[s->prev[i]] = s->nxt[i]; else s->head = s->nxt[i];
    if (s->nxt[i] >= 0) s->prev[s->nxt[i]] = s->prev[i]; else s->tail = s->prev[i];
}

static void append(struct state *s, int64_t i) {
    s->prev[i] = (int32_t)s->tail;
    s->nxt[i] = -1;
    if (s->tail >= 0) s->nxt[s->tail] = (int32_t)i; else s->head = i;
    s->tail = i;
}

static void push_front(struct state *s, int64_t i) {
    s->nxt[i] = (int32_t)s->head;
    s->prev[i] = -1;
    if (s->head >= 0) s->prev[s->head] = (int32_t)i; else s->tail = i;
    s->head = i;
}

static void address(const struct inc_call *c, uint64_t psn, uint32_t *idx, uint32_t *ver) {
    uint64_t size = (uint64_t)c->size;
    uint64_t cell;
    if (c->hashed == 2) {
        cell = (uint64_t)(uint32_t)((uint64_t)c->hash_b + psn) % size;
        *idx = (uint32_t)((uint64_t)c->offset + cell);
        *ver = 0;
        return;
    }
    cell = c->hashed ? ((uint64_t)c->hash_a * psn + (uint64_t)c->hash_b) % size : psn % size;
    *idx = (uint32_t)((uint64_t)c->offset + cell);
    *ver = (uint32_t)((psn / size) & 1);
}

/* Queue packet i (first send or resend) in slot k of the send batch. */
static void queue(struct state *s, int k, int64_t i, int retx) {
    struct inc_call *c = s->c;
    uint64_t psn = (uint64_t)(c->first_psn + i);
    uint32_t idx, ver;
    uint8_t *h = s->hdr + (size_t)k * INC_HEADER_LEN;
    address(c, psn, &idx, &ver);
    h[0] = OP_AGG_SYNC;
    h[1] = retx ? FLAG_RETX : 0;
    put16(h + 2, (uint32_t)c->job_id);
    h[4] = (uint8_t)c->worker_id;
    h[5] = (uint8_t)(ver << 7);
    h[6] = (uint8_t)c->slots;
    h[7] = 0;
    put32(h + 8, (uint32_t)psn);
    put32(h + 12, idx);
    put32(h + 16, (uint32_t)c->epoch);
    put32(h + 20, 0);
    s->iov[2 * k].iov_base = h;
    s->iov[2 * k].iov_len = INC_HEADER_LEN;
    s->iov[2 * k + 1].iov_base = (void *)(c->wire + (size_t)i * (size_t)c->slots * 4);
    s->iov[2 * k + 1].iov_len = (size_t)c->slots * 4;
    memset(&s->msgs[k], 0, sizeof s->msgs[k]);
    s->msgs[k].msg_hdr.msg_name = &s->dest;
    s->msgs[k].msg_hdr.msg_namelen = sizeof s->dest;
    s->msgs[k].msg_hdr.msg_iov = &s->iov[2 * k];
    s->msgs[k].msg_hdr.msg_iovlen = 2;
}

/* Send slots 0..n-1; a full send buffer may stall one datagram SEND_RETRY_S, then it is
 * dropped (the retransmission recovers it), as hosts/transport/udp.py does. */
static int flush(struct state *s, int n) {
    struct inc_call *c = s->c;
    int off = 0, waited = 0;
    size_t bytes = INC_HEADER_LEN + (size_t)c->slots * 4;
    c->queued += n;
    while (off < n) {
        int r = sendmmsg((int)c->fd, s->msgs + off, (unsigned)(n - off), 0);
        if (r > 0) {
            c->sent += r;
            c->sent_bytes += (int64_t)r * (int64_t)bytes;
            off += r;
            waited = 0;
            continue;
        }
        if (errno == EINTR) continue;
        if ((errno == EAGAIN || errno == EWOULDBLOCK) && !waited) {
            struct pollfd p = {.fd = (int)c->fd, .events = POLLOUT};
            poll(&p, 1, (int)(SEND_RETRY_S * 1000));
            waited = 1;
            continue;
        }
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ECONNREFUSED ||
            errno == ENETUNREACH || errno == EHOSTUNREACH) {
            c->send_drops++; /* lost, like on the wire */
            off++;
            waited = 0;
            continue;
        }
        c->err = errno;
        return -1;
    }
    return 0;
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* SendWindow.poll: resend what fell due (oldest PSN first), then open new PSNs. */
static int poll_window(struct state *s, double now) {
    struct inc_call *c = s->c;
    int64_t ndue = 0, i, limit;
    int k = 0;
    for (i = s->head; i >= 0 && now - s->sent_at[i] >= c->timeout; i = s->nxt[i]) s->due[ndue++] = i;
    if (ndue > 1) qsort(s->due, (size_t)ndue, sizeof *s->due, cmp_i64);
    for (int64_t d = 0; d < ndue; d++) {
        i = s->due[d];
        if (s->tries[i] >= c->max_retries) {
            c->fail_psn = c->first_psn + i;
            c->fail_tries = s->tries[i];
            return CALL_RETRIES;
        }
        s->tries[i]++;
        s->sent_at[i] = now;
        unlink_(s, i);
        append(s, i);
        /* results above it so far: a fast retransmission needs fast_retx_results more */
        int64_t below = 0;
        for (int64_t j = 0; j < i; j++) below += c->have[j];
        s->mark[i] = s->results - below;
        s->probe[i] = -1.0; /* its result may answer either copy */
        queue(s, k++, i, 1);
    }
    c->retx += ndue;
    int64_t w = c->window;
    if (c->aimd) {
        /* multiplicative decrease; not before the call's first result: a window with no
         * result at all is a stall (a partner not started yet), not congestion */
        if (ndue && s->results > 0 && now - c->last_cut >= c->timeout) {
            if (c->undo < 0) c->undo = c->cwnd; /* the window before this run of timeouts */
            c->cwnd = c->cwnd / 2 < 1.0 ? 1.0 : c->cwnd / 2;
            c->last_cut = now;
            c->cuts++;
        }
        if (ndue && c->undo >= 0) c->undo_until = now + UNDO_TIMEOUTS * c->timeout;
        w = (int64_t)c->cwnd;
    }
    limit = s->base + w < s->n ? s->base + w : s->n;
    while (s->next < limit) {
        i = s->next++;
        s->inflight[i] = 1;
        s->sent_at[i] = now;
        s->tries[i] = 0;
        s->mark[i] = 0;
        if ((uint64_t)(c->first_psn + i) % (uint64_t)c->rtt_probe_every == 0) s->probe[i] = now;
        append(s, i);
        queue(s, k++, i, 0);
    }
    if (k && flush(s, k) < 0) return CALL_SOCKET;
    return CALL_OK;
}

/* ResultFilter.admit (hosts/transport/result_filter.py): -1 to take the datagram, else the
 * HostDrop reason to count it under. */
static int refuse(const struct inc_call *c, const struct sockaddr_in *src, const uint8_t *p,
                  size_t len) {
    if (src->sin_addr.s_addr != c->dest_ip) return FOREIGN_ADDRESS;
    if (ntohs(src->sin_port) != c->dest_port) return FOREIGN_PORT;
    if (len < INC_HEADER_LEN || len < INC_HEADER_LEN + (size_t)p[6] * 4) return MALFORMED;
    if (p[0] != OP_AGG_SYNC || ((uint32_t)p[2] << 8 | p[3]) != (uint32_t)c->job_id) return OTHER_JOB;
    uint32_t extra = p[1] & ~(uint32_t)c->worker_flags;
    if ((extra & FLAG_RESULT) ? (extra & ~(uint32_t)c->result_flags) != 0 : extra != FLAG_WAIT)
        return FORGED_FLAGS;
    if (p[6] != (uint32_t)c->slots) return BAD_SLOT_COUNT;
    return -1;
}

/* A decrease proved spurious: the window before it again. */
static void undo_cut(struct inc_call *c) {
    if (c->undo > c->cwnd) c->cwnd = c->undo;
    c->undo = -1.0;
    c->undone++;
}

/* One admitted answer: a hold-back (WAIT) or a result. */
static void on_packet(struct state *s, const uint8_t *p) {
    struct inc_call *c = s->c;
    int64_t i = (int64_t)get32(p + 8) - c->first_psn;
    if (!(p[1] & FLAG_RESULT)) { /* WAIT: the resend is not spent */
        if (i >= 0 && i < s->n && s->inflight[i] && s->tries[i] > 0) s->tries[i]--;
        c->waits++;
        return;
    }
    if (i < 0 || i >= s->n || c->have[i]) {
        c->dups++;
        if (c->aimd && c->undo >= 0) undo_cut(c); /* answered twice: it was late */
        return;
    }
    int32_t *row = c->out + (size_t)i * (size_t)c->slots;
    for (int64_t k = 0; k < c->slots; k++) row[k] = (int32_t)get32(p + INC_HEADER_LEN + 4 * k);
    c->have[i] = 1;
    c->bitmaps[i] = get32(p + 20);
    if (s->probe[i] >= 0) {
        double rtt = now_s() - s->probe[i];
        if (c->min_rtt < 0 || rtt < c->min_rtt) c->min_rtt = rtt;
        if (c->rtt_floor < 0 || rtt < c->rtt_floor) c->rtt_floor = rtt;
        s->probe[i] = -1.0;
    }
    s->results++;
    c->results++;
    if (c->aimd && c->undo >= 0) {
        double now = now_s();
        if (s->tries[i] > 0 && c->rtt_floor >= 0 && now - s->sent_at[i] < c->rtt_floor)
            undo_cut(c); /* sooner than any round trip: it answers the original */
        else if (now > c->undo_until)
            c->undo = -1.0; /* no sign the resent packets' originals were answered */
    }
    if (c->aimd) { /* additive increase: + 1 per window of results */
        c->cwnd += 1.0 / c->cwnd;
        if (c->cwnd > (double)c->window) c->cwnd = (double)c->window;
    }
    if (s->inflight[i]) { /* SendWindow.ack */
        s->inflight[i] = 0;
        unlink_(s, i);
        while (s->base < s->next && !s->inflight[s->base]) s->base++;
    }
}

/* Drain the socket; then the fast retransmission of a base that holds the window. */
/* Whether datagram `h` (received with IP_RECVTOS on) is marked Congestion Experienced. */
static int ce_marked(struct msghdr *h) {
    for (struct cmsghdr *cm = CMSG_FIRSTHDR(h); cm; cm = CMSG_NXTHDR(h, cm))
        if (cm->cmsg_level == IPPROTO_IP && cm->cmsg_type == IP_TOS)
            return (*(const uint8_t *)CMSG_DATA(cm) & 3) == 3;
    return 0;
}

/* The length of each datagram in a run the kernel kept whole (UDP_GRO), else 0. */
static uint32_t gro_size(struct msghdr *h) {
    for (struct cmsghdr *cm = CMSG_FIRSTHDR(h); cm; cm = CMSG_NXTHDR(h, cm))
        if (cm->cmsg_level == IPPROTO_UDP && cm->cmsg_type == UDP_GRO) {
            int size;
            memcpy(&size, CMSG_DATA(cm), sizeof size);
            return size > 0 ? (uint32_t)size : 0;
        }
    return 0;
}

static int receive(struct state *s, uint8_t (*buf)[RECV_SLOT], struct mmsghdr *m,
                   struct iovec *iov, struct sockaddr_in *src) {
    struct inc_call *c = s->c;
    union {
        struct cmsghdr aligned;
        uint8_t b[CMSG_SLOT];
    } ctl[RECV_BATCH];
    int marked = 0;
    for (;;) {
        for (int k = 0; k < RECV_BATCH; k++) {
            iov[k].iov_base = buf[k];
            iov[k].iov_len = RECV_SLOT;
            memset(&m[k].msg_hdr, 0, sizeof m[k].msg_hdr);
            m[k].msg_hdr.msg_iov = &iov[k];
            m[k].msg_hdr.msg_iovlen = 1;
            m[k].msg_hdr.msg_name = &src[k];
            m[k].msg_hdr.msg_namelen = sizeof src[k];
            m[k].msg_hdr.msg_control = ctl[k].b;
            m[k].msg_hdr.msg_controllen = sizeof ctl[k].b;
        }
        int r = recvmmsg((int)c->fd, m, RECV_BATCH, MSG_DONTWAIT, NULL);
        if (r < 0) {
            if (errno == EINTR || errno == ECONNREFUSED) continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) break;
            c->err = errno;
            return CALL_SOCKET;
        }
        for (int k = 0; k < r; k++) {
            int ce = c->ecn && ce_marked(&m[k].msg_hdr);
            uint32_t len = m[k].msg_len, seg = gro_size(&m[k].msg_hdr);
            if (!seg || seg > len) seg = len;
            if (seg < len) c->gro_runs++;
            for (uint32_t off = 0; off < len || off == 0; off += seg) { /* each datagram */
                uint32_t n = len - off < seg ? len - off : seg;
                c->received++;
                c->received_bytes += n;
                if (ce) {
                    c->ce_marked++;
                    marked = 1;
                }
                int why = refuse(c, &src[k], buf[k] + off, n);
                if (why >= 0)
                    c->drops[why]++;
                else
                    on_packet(s, buf[k] + off);
                if (!seg) break;
            }
        }
        if (r < RECV_BATCH) break;
    }
    double now = marked && c->aimd ? now_s() : 0.0; /* the clock only for a mark */
    if (marked && c->aimd && now - c->last_cut >= c->timeout) {
        c->cwnd = c->cwnd / 2 < 1.0 ? 1.0 : c->cwnd / 2;
        c->last_cut = now;
        c->cuts++;
        c->ecn_cuts++;
        c->undo = -1.0; /* congestion the switch saw: no timeout to take back */
    }
    if (s->base < s->n && s->base < s->next && s->inflight[s->base]) {
        int64_t b = s->base, above = s->results - b;
        double due = now_s() - c->timeout;
        if (above - s->mark[b] >= c->fast_retx_results && s->sent_at[b] > due) {
            s->sent_at[b] = due;
            unlink_(s, b);
            push_front(s, b);
            c->fast_retx++;
        }
    }
    return CALL_OK;
}

int inc_allreduce(struct inc_call *c) {
    struct state s;
    int rc = CALL_NOMEM;
    int64_t n = c->count, w = c->window;
    static __thread uint8_t (*rbuf)[RECV_SLOT];
    struct mmsghdr rm[RECV_BATCH];
    struct iovec riov[RECV_BATCH];
    struct sockaddr_in rsrc[RECV_BATCH];
    memset(&s, 0, sizeof s);
    s.c = c;
    s.n = n;
    s.head = s.tail = -1;
    c->min_rtt = -1.0;
    if (!rbuf && !(rbuf = malloc((size_t)RECV_BATCH * RECV_SLOT))) return CALL_NOMEM;
    s.sent_at = malloc((size_t)n * sizeof(double));
    s.probe = malloc((size_t)n * sizeof(double));
    s.tries = malloc((size_t)n * sizeof(int32_t));
    s.prev = malloc((size_t)n * sizeof(int32_t));
    s.nxt = malloc((size_t)n * sizeof(int32_t));
    s.mark = malloc((size_t)n * sizeof(int64_t));
    s.inflight = calloc((size_t)n, 1);
    s.msgs = malloc((size_t)w * sizeof *s.msgs);
    s.iov = malloc((size_t)w * 2 * sizeof *s.iov);
    s.hdr = malloc((size_t)w * INC_HEADER_LEN);
    s.due = malloc((size_t)w * sizeof *s.due);
    if (!s.sent_at || !s.probe || !s.tries || !s.prev || !s.nxt || !s.mark || !s.inflight ||
        !s.msgs || !s.iov || !s.hdr || !s.due)
        goto out;
    for (int64_t i = 0; i < n; i++) s.probe[i] = -1.0;
    s.dest.sin_family = AF_INET;
    s.dest.sin_addr.s_addr = c->dest_ip;
    s.dest.sin_port = htons((uint16_t)c->dest_port);
    double deadline = now_s() + c->total_timeout;
    int gro = 1; /* runs of results the kernel keeps whole are cut here; off again after */
    setsockopt((int)c->fd, IPPROTO_UDP, UDP_GRO, &gro, sizeof gro);
    for (;;) {
        if (s.results >= n) { rc = CALL_OK; break; }
        double now = now_s();
        rc = poll_window(&s, now);
        if (rc != CALL_OK) break;
        now = now_s();
        if (now >= deadline) { rc = CALL_DEADLINE; break; }
        double until = deadline;
        if (s.head >= 0 && s.sent_at[s.head] + c->timeout < until) until = s.sent_at[s.head] + c->timeout;
        double wait = until - now;
        if (wait < 0) wait = 0;
        struct timespec ts = {.tv_sec = (time_t)wait, .tv_nsec = (long)((wait - (double)(time_t)wait) * 1e9)};
        struct pollfd p = {.fd = (int)c->fd, .events = POLLIN};
        int r = ppoll(&p, 1, &ts, NULL);
        if (r < 0 && errno != EINTR) { c->err = errno; rc = CALL_SOCKET; break; }
        if (r > 0) {
            rc = receive(&s, rbuf, rm, riov, rsrc);
            if (rc != CALL_OK) break;
        }
    }
    gro = 0;
    setsockopt((int)c->fd, IPPROTO_UDP, UDP_GRO, &gro, sizeof gro);
out:
    free(s.sent_at); free(s.probe); free(s.tries); free(s.prev); free(s.nxt); free(s.mark);
    free(s.inflight); free(s.msgs); free(s.iov); free(s.hdr); free(s.due);
    return rc;
}
