/* The parameter server's serve loop in C: hosts/netreduce/ps.py's SoftAggregator state
 * machine (the switch's aggregator, p4src/aggregator.p4, on a host) behind one UDP socket,
 * read with recvmmsg and answered with sendmmsg, so the PS baseline gets the same native
 * transport as the switch path's client (hosts/transport/native_window.c).
 *
 * Same rules as SoftAggregator.process, one for one: per (job, aggregator, version) a
 * contributor bitmap, a count and the PSN of the use it holds; a packet of a newer PSN
 * starts the copy afresh, an older one is dropped as stale, a repeated contribution to an
 * unfinished use is a duplicate, a packet of a finished use gets the result again (to its
 * sender); the last contribution sends the result to every worker of the job, to the
 * address its packets came from. Every job gets the default region (the whole pool) and
 * quorum, as the PS started from the command line does; it keeps MAX_JOBS_HELD jobs at
 * once and drops a further job's packets as UNKNOWN_JOB. A worker with a declared IP
 * (ps_declare: the job's plan) is taken only from it, `spoofed` otherwise, first or not. A
 * (job, worker) is bound to the address of its first admitted packet: the same worker from
 * another address is counted `spoofed` and dropped; flags a worker never sets (beyond worker_flags, wire.header.WORKER_FLAGS)
 * are FORGED_RESULT; results carry RESULT and the worker's flags only.
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
#define FLAG_RESULT 0x02
#define NOT_AGGREGATED (0x02 | 0x04 | 0x10) /* RESULT | ACK | FALLBACK */
#define MAX_SLOTS 255
#define MAX_WORKERS 32
#define MAX_JOBS_HELD 64
#define BATCH 64
#define SLOT 2048
#define HALF 0x80000000u

/* wire/header.py DropReason */
enum { UNKNOWN_JOB = 0, UNKNOWN_WORKER = 1, OUT_OF_REGION = 2, BAD_SLOT_COUNT = 3, STALE = 4,
       DUPLICATE = 5, FORGED_RESULT = 7, N_DROPS = 16 };

struct copy {
    uint32_t psn, bitmap, count, nvals;
    uint8_t used;
};

struct job {
    uint32_t id;
    struct copy *copies; /* pool x 2 */
    int32_t *values;     /* pool x 2 x stride */
    struct sockaddr_in workers[MAX_WORKERS];
    uint32_t known;
};

struct ps_ctx {
    int64_t fd, quorum, slots, pool; /* slots 0: any count */
    int64_t packets, results, reserved, ignored, err;
    int64_t drops[N_DROPS];
    int64_t spoofed; /* a bound (job, worker)'s packets from another address */
    int64_t worker_flags;
    int64_t n_jobs;
    struct job jobs[MAX_JOBS_HELD];
    /* results waiting for sendmmsg */
    uint8_t *out;
    struct sockaddr_in *out_to;
    int64_t n_out, cap_out;
    uint32_t declared[MAX_WORKERS]; /* worker's IP (network order) from the plan; 0: any */
};


struct ps_ctx *ps_new(int64_t fd, int64_t quorum, int64_t slots, int64_t pool, int64_t worker_flags) {
    struct ps_ctx *x = calloc(1, sizeof *x);
    if (!x) return NULL;
    x->fd = fd;
    x->quorum = quorum;
    x->slots = slots;
    x->pool = pool;
    x->worker_flags = worker_flags;
    return x;
}

void ps_declare(struct ps_ctx *x, int64_t worker, uint32_t ip_be) {
    if (worker >= 0 && worker < MAX_WORKERS) x->declared[worker] = ip_be;
}

void ps_free(struct ps_ctx *x) {
    if (!x) return;
    for (int64_t i = 0; i < x->n_jobs; i++) {
        free(x->jobs[i].copies);
        free(x->jobs[i].values);
    }
    free(x->out);
    free(x->out_to);
    free(x);
}

static int64_t stride(const struct ps_ctx *x) { return x->slots ? x->slots : MAX_SLOTS; }

static int held(const struct ps_ctx *x, uint32_t id) {
    for (int64_t i = 0; i < x->n_jobs; i++)
        if (x->jobs[i].id == id) return 1;
    return 0;
}

static struct job *job_of(struct ps_ctx *x, uint32_t id) {
    for (int64_t i = 0; i < x->n_jobs; i++)
        if (x->jobs[i].id == id) return &x->jobs[i];
    if (x->n_jobs == MAX_JOBS_HELD) return NULL;
    struct job *j = &x->jobs[x->n_jobs];
    memset(j, 0, sizeof *j);
    j->copies = calloc((size_t)x->pool * 2, sizeof *j->copies);
    j->values = calloc((size_t)x->pool * 2 * (size_t)stride(x), sizeof *j->values);
    if (!j->copies || !j->values) {
        free(j->copies);
        free(j->values);
        return NULL;
    }
    j->id = id;
    x->n_jobs++;
    return j;
}

static int queue_result(struct ps_ctx *x, const uint8_t *h, const struct copy *c, const int32_t *v,
                        uint32_t worker, const struct sockaddr_in *to) {
    if (x->n_out == x->cap_out) {
        int64_t cap = x->cap_out ? 2 * x->cap_out : 256;
        uint8_t *o = realloc(x->out, (size_t)cap * SLOT);
        if (!o) return -1;
        x->out = o;
        struct sockaddr_in *t = realloc(x->out_to, (size_t)cap * sizeof *t);
        if (!t) return -1;
        x->out_to = t;
        x->cap_out = cap;
    }
    uint8_t *p = x->out + (size_t)x->n_out * SLOT;
    memcpy(p, h, HDR);
    p[1] = (uint8_t)((h[1] & x->worker_flags) | FLAG_RESULT);
    p[4] = (uint8_t)worker;
    p[5] = h[5] & 0x80; /* ver; reserved bits zero */
    p[6] = (uint8_t)c->nvals;
    p[7] = 0;
    put32(p + 20, c->bitmap);
    for (uint32_t k = 0; k < c->nvals; k++) put32(p + HDR + 4 * k, (uint32_t)v[k]);
    x->out_to[x->n_out++] = *to;
    return 0;
}

static int process(struct ps_ctx *x, const uint8_t *h, size_t len, const struct sockaddr_in *src) {
    uint32_t cnt = h[6];
    if (len < HDR || len < HDR + 4 * (size_t)cnt) {
        x->ignored++; /* not a packet of ours (unpack fails) */
        return 0;
    }
    x->packets++;
    if (h[0] != OP_AGG_SYNC || (h[1] & NOT_AGGREGATED)) {
        x->ignored++;
        return 0;
    }
    if (h[1] & ~(uint32_t)x->worker_flags) {
        x->drops[FORGED_RESULT]++; /* no worker sets these */
        return 0;
    }
    uint32_t job_id = (uint32_t)h[2] << 8 | h[3], worker = h[4], psn = get32(h + 8);
    uint32_t idx = get32(h + 12), ver = h[5] >> 7;
    int64_t q = x->quorum < MAX_WORKERS ? x->quorum : MAX_WORKERS;
    int reason = -1;
    if (x->slots && cnt != (uint32_t)x->slots) reason = BAD_SLOT_COUNT;
    else if (job_id == 0) reason = UNKNOWN_JOB;
    else if (worker >= q) reason = UNKNOWN_WORKER;
    else if (idx >= (uint64_t)x->pool) reason = OUT_OF_REGION;
    if (reason >= 0) {
        x->drops[reason]++;
        return 0;
    }
    if (!held(x, job_id) && x->n_jobs == MAX_JOBS_HELD) {
        x->drops[UNKNOWN_JOB]++; /* more jobs at once than this server keeps */
        return 0;
    }
    if (x->declared[worker] && x->declared[worker] != src->sin_addr.s_addr) {
        x->spoofed++; /* not from the worker's declared host */
        return 0;
    }
    struct job *j = job_of(x, job_id);
    if (!j) return -1; /* no memory for the job's aggregators */
    if (j->known & (1u << worker)) {
        const struct sockaddr_in *b = &j->workers[worker];
        if (b->sin_addr.s_addr != src->sin_addr.s_addr || b->sin_port != src->sin_port) {
            x->spoofed++; /* another host claims a bound worker */
            return 0;
        }
    } else {
        j->workers[worker] = *src;
        j->known |= 1u << worker;
    }
    struct copy *c = &j->copies[2 * idx + ver];
    int32_t *v = j->values + (2 * (size_t)idx + ver) * (size_t)stride(x);
    const uint8_t *in = h + HDR;
    uint32_t bit = 1u << worker, delta = psn - c->psn;
    if (c->used && delta >= HALF) {
        x->drops[STALE]++;
        return 0;
    }
    if (c->used && delta == 0 && c->count >= x->quorum) {
        x->reserved++;
        return queue_result(x, h, c, v, worker, src);
    }
    if (c->used && delta == 0 && (c->bitmap & bit)) {
        x->drops[DUPLICATE]++;
        return 0;
    }
    if (c->used && delta == 0) {
        if (cnt != c->nvals) {
            x->drops[BAD_SLOT_COUNT]++;
            return 0;
        }
        for (uint32_t k = 0; k < cnt; k++) v[k] = (int32_t)((uint32_t)v[k] + get32(in + 4 * k));
    } else {
        c->used = 1;
        c->psn = psn;
        c->bitmap = c->count = 0;
        c->nvals = cnt;
        for (uint32_t k = 0; k < cnt; k++) v[k] = (int32_t)get32(in + 4 * k);
    }
    c->bitmap |= bit;
    c->count++;
    if (c->count < x->quorum) return 0;
    x->results++;
    for (uint32_t w = 0; w < (uint32_t)x->quorum; w++)
        if (j->known & (1u << w) && queue_result(x, h, c, v, w, &j->workers[w]) < 0) return -1;
    return 0;
}

static uint32_t result_len(const uint8_t *d, int64_t i, const void *ctx) {
    (void)i, (void)ctx;
    return HDR + 4 * (uint32_t)d[6]; /* the header and its slot_count values */
}

static int flush(void *ctx) {
    struct ps_ctx *x = ctx;
    if (x->n_out == 0) return 0;
    if (send_datagrams((int)x->fd, x->out, SLOT, x->out_to, x->n_out, result_len, NULL, &x->err) < 0)
        return -1;
    x->n_out = 0;
    return 0;
}

static int on_datagram(void *ctx, uint8_t *d, unsigned len, const struct sockaddr_in *src) {
    return process(ctx, d, len, src);
}

/* Serve until `max_ms` pass without a datagram (then 0, for the caller to look at its stop
 * flag), or a socket error (-1) or no memory (-2). */
int ps_serve(struct ps_ctx *x, int64_t max_ms) {
    static __thread uint8_t buf[BATCH][SLOT];
    return serve_datagrams((int)x->fd, max_ms, &buf[0][0], SLOT, BATCH, 1, on_datagram, flush, x,
                           &x->err);
}
