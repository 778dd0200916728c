/* ATP's parameter server in C: hosts/atp/ps.py's AtpAggregator (the reference) behind one
 * UDP socket, read with recvmmsg and answered with sendmmsg, so the shared pool's PS gets
 * the same native transport as its workers (hosts/transport/native_window.c) and as the
 * baselines' PS (hosts/netreduce/native_ps.c).
 *
 * Same rules as AtpAggregator.process_payload, one for one (docs/protocol.md, ATP): the
 * switch's copy of a result it multicast (RESULT, every worker's bit) is remembered and
 * acknowledged with an ACK that releases the aggregator; any other packet of a served job
 * is a piece (values and the bitmap of the workers they sum, or 1 << worker_id without
 * one); per (job, psn) disjoint pieces are kept, a covered piece is a duplicate, one
 * containing every stored piece it overlaps replaces them; int64 sums, wrapped to int32
 * once all workers are covered; the result goes with RESULT to the job's result address;
 * a RETX piece of a finished psn gets it again. Two tables differ from the reference's
 * dictionaries in memory, not in what a run of psns sees: finished psns are kept by
 * psn % keep (the reference keeps the newest `keep` finished), and a pending psn is
 * forgotten when another psn congruent to it modulo `keep` starts pending (the reference
 * keeps both; a psn `keep` apart from one still pending is never in flight at once).
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
#define OP_AGG_SYNC 1
#define FLAG_RETX 0x01
#define FLAG_RESULT 0x02
#define FLAG_ACK 0x04
#define MAX_WORKERS 32
#define MAX_JOBS 64
#define MAX_SLOTS 255
#define BATCH 64
#define SLOT 2048

struct done { uint32_t psn, idx, epoch, used; };

struct pending {
    uint32_t psn, n; /* n pieces */
    uint64_t covered;
    uint64_t bitmaps[MAX_WORKERS];
    int64_t sums[]; /* n_workers x slots: piece i at i x slots */
};

struct atp_job {
    uint32_t id, n_workers;
    uint64_t full;
    struct sockaddr_in to;
    struct done *done;    /* keep */
    uint8_t *bodies;      /* keep x 4 x slots: each finished psn's values on the wire */
    struct pending **pend; /* keep */
};

struct atp_ps {
    /* mirrored by hosts/atp/native_ps.py's _Ctx: keep the order */
    int64_t fd, slots, keep;
    int64_t packets, pieces, aggregates, duplicates, conflicts, results, multicast, reserved,
        ignored, forged;
    int64_t err, n_out;
    /* the rest is private */
    int64_t n_jobs, cap_out;
    struct atp_job jobs[MAX_JOBS];
    uint8_t *out; /* datagrams waiting for sendmmsg, SLOT bytes each */
    uint32_t *out_len;
    struct sockaddr_in *out_to;
};

struct atp_ps *atp_ps_new(int64_t fd, int64_t slots, int64_t keep) {
    if (slots < 1 || slots > MAX_SLOTS || keep < 1) return NULL;
    struct atp_ps *x = calloc(1, sizeof *x);
    if (!x) return NULL;
    x->fd = fd;
    x->slots = slots;
    x->keep = keep;
    return x;
}

static void free_job(struct atp_ps *x, struct atp_job *j) {
    if (j->pend)
        for (int64_t i = 0; i < x->keep; i++) free(j->pend[i]);
    free(j->pend);
    free(j->done);
    free(j->bodies);
}

void atp_ps_free(struct atp_ps *x) {
    if (!x) return;
    for (int64_t i = 0; i < x->n_jobs; i++) free_job(x, &x->jobs[i]);
    free(x->out);
    free(x->out_len);
    free(x->out_to);
    free(x);
}

/* Serve job `id` of `n_workers` workers, results to ip_be:port (network order, as
 * sin_addr; port in host order). 0, or -1 (bad arguments, too many jobs) or -2 (memory). */
int atp_ps_job(struct atp_ps *x, int64_t id, int64_t n_workers, uint32_t ip_be, int64_t port) {
    if (n_workers < 1 || n_workers > MAX_WORKERS || x->n_jobs == MAX_JOBS) return -1;
    for (int64_t i = 0; i < x->n_jobs; i++)
        if (x->jobs[i].id == (uint32_t)id) return -1;
    struct atp_job *j = &x->jobs[x->n_jobs];
    memset(j, 0, sizeof *j);
    j->id = (uint32_t)id;
    j->n_workers = (uint32_t)n_workers;
    j->full = (1ull << n_workers) - 1;
    j->to.sin_family = AF_INET;
    j->to.sin_addr.s_addr = ip_be;
    j->to.sin_port = htons((uint16_t)port);
    j->done = calloc((size_t)x->keep, sizeof *j->done);
    j->bodies = malloc((size_t)x->keep * 4 * (size_t)x->slots);
    j->pend = calloc((size_t)x->keep, sizeof *j->pend);
    if (!j->done || !j->bodies || !j->pend) {
        free_job(x, j);
        return -2;
    }
    x->n_jobs++;
    return 0;
}

static struct atp_job *job_of(struct atp_ps *x, uint32_t id) {
    for (int64_t i = 0; i < x->n_jobs; i++)
        if (x->jobs[i].id == id) return &x->jobs[i];
    return NULL;
}

static uint8_t *queue(struct atp_ps *x, const struct atp_job *j, uint32_t len) {
    if (x->n_out == x->cap_out) {
        int64_t cap = x->cap_out ? 2 * x->cap_out : 256;
        uint8_t *o = realloc(x->out, (size_t)cap * SLOT);
        if (!o) return NULL;
        x->out = o;
        uint32_t *l = realloc(x->out_len, (size_t)cap * sizeof *l);
        if (!l) return NULL;
        x->out_len = l;
        struct sockaddr_in *t = realloc(x->out_to, (size_t)cap * sizeof *t);
        if (!t) return NULL;
        x->out_to = t;
        x->cap_out = cap;
    }
    x->out_len[x->n_out] = len;
    x->out_to[x->n_out] = j->to;
    return x->out + (size_t)x->n_out++ * SLOT;
}

static void header(uint8_t *p, uint32_t flags, uint32_t job, uint32_t count, uint32_t psn,
                   uint32_t idx, uint32_t epoch, uint32_t bitmap) {
    p[0] = OP_AGG_SYNC;
    p[1] = (uint8_t)flags;
    put16(p + 2, job);
    p[4] = p[5] = p[7] = 0; /* worker 0, version 0 */
    p[6] = (uint8_t)count;
    put32(p + 8, psn);
    put32(p + 12, idx);
    put32(p + 16, epoch);
    put32(p + 20, bitmap);
}

static const struct done *finished(const struct atp_ps *x, const struct atp_job *j, uint32_t psn) {
    const struct done *d = &j->done[psn % (uint64_t)x->keep];
    return d->used && d->psn == psn ? d : NULL;
}

static int send_result(struct atp_ps *x, const struct atp_job *j, const struct done *d) {
    size_t body = 4 * (size_t)x->slots;
    uint8_t *p = queue(x, j, (uint32_t)(HDR + body));
    if (!p) return -2;
    header(p, FLAG_RESULT, j->id, (uint32_t)x->slots, d->psn, d->idx, d->epoch, (uint32_t)j->full);
    memcpy(p + HDR, j->bodies + (size_t)(d - j->done) * body, body);
    return 0;
}

static void forget_pending(const struct atp_ps *x, struct atp_job *j, uint32_t psn) {
    struct pending **e = &j->pend[psn % (uint64_t)x->keep];
    if (*e && (*e)->psn == psn) {
        free(*e);
        *e = NULL;
    }
}

static struct done *remember(struct atp_ps *x, struct atp_job *j, uint32_t psn, uint32_t idx,
                             uint32_t epoch, const uint8_t *body) {
    uint64_t at = psn % (uint64_t)x->keep;
    struct done *d = &j->done[at];
    *d = (struct done){.psn = psn, .idx = idx, .epoch = epoch, .used = 1};
    memcpy(j->bodies + at * 4 * (size_t)x->slots, body, 4 * (size_t)x->slots);
    x->results++;
    return d;
}

/* The switch's copy of a result it multicast: remembered and acknowledged. */
static int copy(struct atp_ps *x, struct atp_job *j, uint32_t psn, uint32_t idx, uint32_t epoch,
                const uint8_t *body) {
    if (finished(x, j, psn)) {
        x->duplicates++;
        return 0;
    }
    forget_pending(x, j, psn);
    remember(x, j, psn, idx, epoch, body);
    x->pieces++;
    x->aggregates++;
    x->multicast++;
    uint8_t *p = queue(x, j, HDR);
    if (!p) return -2;
    header(p, FLAG_ACK, j->id, 0, psn, idx, epoch, (uint32_t)j->full);
    return 0;
}

static int many(uint64_t bits) { return (bits & (bits - 1)) != 0; }

static int piece_in(struct atp_ps *x, struct atp_job *j, const uint8_t *h, uint64_t piece) {
    uint32_t psn = get32(h + 8), idx = get32(h + 12), epoch = get32(h + 16);
    int64_t k = x->slots;
    struct pending **slot = &j->pend[psn % (uint64_t)x->keep];
    struct pending *st = *slot && (*slot)->psn == psn ? *slot : NULL;
    if (piece == j->full && !st) {
        /* the switch's complete aggregate, no piece of the psn pending: the result as is */
        x->pieces++;
        x->aggregates += many(piece);
        return send_result(x, j, remember(x, j, psn, idx, epoch, h + HDR));
    }
    if (!st) {
        free(*slot); /* a psn keep apart, still pending: forgotten (see the top) */
        st = calloc(1, sizeof *st + (size_t)j->n_workers * (size_t)k * sizeof(int64_t));
        if (!st) return -2;
        st->psn = psn;
        *slot = st;
    }
    if ((piece & ~st->covered) == 0) {
        x->duplicates++;
        return 0;
    }
    for (uint32_t i = 0; i < st->n; i++)
        if ((st->bitmaps[i] & piece) && (st->bitmaps[i] & ~piece)) {
            x->conflicts++;
            return 0;
        }
    uint32_t n = 0; /* keep the pieces it does not contain, in order */
    for (uint32_t i = 0; i < st->n; i++) {
        if (st->bitmaps[i] & piece) continue;
        if (n != i) {
            st->bitmaps[n] = st->bitmaps[i];
            memcpy(st->sums + n * k, st->sums + i * k, (size_t)k * sizeof(int64_t));
        }
        n++;
    }
    st->bitmaps[n] = piece;
    for (int64_t s = 0; s < k; s++) st->sums[n * k + s] = (int32_t)get32(h + HDR + 4 * s);
    st->n = n + 1;
    st->covered |= piece;
    x->pieces++;
    x->aggregates += many(piece);
    if (st->covered != j->full) return 0;
    uint8_t body[4 * MAX_SLOTS];
    for (int64_t s = 0; s < k; s++) {
        int64_t total = 0;
        for (uint32_t i = 0; i < st->n; i++) total += st->sums[i * k + s];
        put32(body + 4 * s, (uint32_t)total); /* int32 wrap, as the host sum */
    }
    free(st);
    *slot = NULL;
    return send_result(x, j, remember(x, j, psn, idx, epoch, body));
}

/* One datagram in; what it sends is queued. 0, or -2 without memory. */
int atp_ps_process(struct atp_ps *x, const uint8_t *h, int64_t len) {
    x->packets++;
    if (len < HDR || (size_t)len < HDR + 4 * (size_t)h[6]) {
        x->ignored++; /* not a packet of ours */
        return 0;
    }
    uint32_t op = h[0], flags = h[1], job = (uint32_t)h[2] << 8 | h[3], worker = h[4];
    uint32_t count = h[6], bitmap = get32(h + 20);
    struct atp_job *j = job_of(x, job);
    if (j && (flags & FLAG_RESULT) && bitmap == j->full) {
        /* the switch's copy of a result it multicast (or resent with RETX) */
        if (op != OP_AGG_SYNC || (flags & ~(uint32_t)(FLAG_RESULT | FLAG_RETX)) ||
            count != (uint32_t)x->slots) {
            x->ignored++;
            return 0;
        }
        return copy(x, j, get32(h + 8), get32(h + 12), get32(h + 16), h + HDR);
    }
    if (!j || op != OP_AGG_SYNC || (flags & (FLAG_RESULT | FLAG_ACK)) ||
        count != (uint32_t)x->slots) {
        x->ignored++;
        return 0;
    }
    const struct done *d = finished(x, j, get32(h + 8));
    if (d) {
        if (!(flags & FLAG_RETX)) {
            x->duplicates++;
            return 0;
        }
        x->reserved++;
        return send_result(x, j, d);
    }
    uint64_t piece = bitmap ? bitmap : 1ull << (worker < MAX_WORKERS ? worker : MAX_WORKERS);
    if (piece & ~j->full) {
        x->forged++;
        return 0;
    }
    return piece_in(x, j, h, piece);
}

/* Queued datagram i (tests read what the state machine sent): its length, bytes copied to
 * buf (SLOT bytes), destination into ip_be / port. */
int64_t atp_ps_out(const struct atp_ps *x, int64_t i, uint8_t *buf, uint32_t *ip_be, uint32_t *port) {
    if (i < 0 || i >= x->n_out) return -1;
    memcpy(buf, x->out + (size_t)i * SLOT, x->out_len[i]);
    *ip_be = x->out_to[i].sin_addr.s_addr;
    *port = ntohs(x->out_to[i].sin_port);
    return x->out_len[i];
}

void atp_ps_clear(struct atp_ps *x) { x->n_out = 0; }

static uint32_t out_len_of(const uint8_t *d, int64_t i, const void *ctx) {
    (void)d;
    return ((const struct atp_ps *)ctx)->out_len[i];
}

static int flush(void *ctx) {
    struct atp_ps *x = ctx;
    if (x->n_out == 0) return 0;
    if (send_datagrams((int)x->fd, x->out, SLOT, x->out_to, x->n_out, out_len_of, x, &x->err) < 0)
        return -1;
    x->n_out = 0;
    return 0;
}

static int on_datagram(void *ctx, uint8_t *d, unsigned len, const struct sockaddr_in *src) {
    (void)src;
    return atp_ps_process(ctx, d, len);
}

/* Serve until `max_ms` pass without a datagram (then 0, for the caller to look at its stop
 * flag), or a socket error (-1) or no memory (-2). */
int atp_ps_serve(struct atp_ps *x, int64_t max_ms) {
    static __thread uint8_t buf[BATCH][SLOT];
    return serve_datagrams((int)x->fd, max_ms, &buf[0][0], SLOT, BATCH, 0, on_datagram, flush, x,
                           &x->err);
}
