/* p4sim native back end: run-time support included by every generated program.
 * Every P4 value of up to 64 bits is a uint64_t kept masked to its width (as the Python
 * back end keeps ints masked). Tables, registers and counters live in memory that the
 * Python side owns (numpy arrays) and points this code at; see p4sim/native/backend.py. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <poll.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <pthread.h>
#include <arpa/inet.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>

typedef uint64_t u64;

#define P4N_MAXPKT 65600
#define P4N_MAXOUT 64

/* A match-action table as the Python side lays it out: n entries in lookup order
 * (the first match wins), each with nkeys (value, mask) pairs, an action index, nargs
 * action data and a direct counter (packets, bytes). exact != 0: entries are sorted by
 * their key tuple and found by binary search. */
typedef struct {
    int64_t n, nkeys, nargs, exact;
    u64 *vals, *masks;
    int64_t *action;
    u64 *args, *counters;
    int64_t def_action;
    u64 *def_args;
} p4n_table;

typedef struct {
    int64_t n;      /* replicas */
    u64 *ports;     /* n ports */
    u64 *rids;      /* n rids */
} p4n_group;

static inline u64 p4n_shl(u64 a, u64 b, u64 m) { return b >= 64 ? 0 : (a << b) & m; }
static inline u64 p4n_shr(u64 a, u64 b) { return b >= 64 ? 0 : a >> b; }
static inline u64 p4n_div(u64 a, u64 b) { return b ? a / b : 0; }
static inline u64 p4n_mod(u64 a, u64 b) { return b ? a % b : 0; }

static int64_t p4n_lookup(const p4n_table *t, const u64 *key) {
    int64_t nk = t->nkeys;
    if (t->exact) {
        int64_t lo = 0, hi = t->n - 1;
        while (lo <= hi) {
            int64_t mid = (lo + hi) >> 1;
            const u64 *v = t->vals + mid * nk;
            int c = 0;
            for (int64_t i = 0; i < nk; i++) {
                if (key[i] != v[i]) { c = key[i] < v[i] ? -1 : 1; break; }
            }
            if (c == 0) return mid;
            if (c < 0) hi = mid - 1; else lo = mid + 1;
        }
        return -1;
    }
    for (int64_t e = 0; e < t->n; e++) {
        const u64 *v = t->vals + e * nk, *m = t->masks + e * nk;
        int64_t i = 0;
        for (; i < nk; i++)
            if ((key[i] & m[i]) != v[i]) break;
        if (i == nk) return e;
    }
    return -1;
}

/* Bits [off, off + w) of a big-endian byte string (w <= 64). */
static inline u64 p4n_get_bits(const uint8_t *d, u64 off, int w) {
    u64 v = 0;
    u64 first = off >> 3, last = (off + w - 1) >> 3;
    unsigned __int128 acc = 0;
    for (u64 i = first; i <= last; i++) acc = (acc << 8) | d[i];
    int tail = (int)(((last + 1) << 3) - (off + w));
    acc >>= tail;
    v = (u64)acc;
    if (w < 64) v &= (((u64)1) << w) - 1;
    return v;
}

/* Big-endian loads and stores of n whole bytes (n constant: unrolled by the compiler). */
static inline u64 p4n_ld(const uint8_t *p, int n) {
    u64 v = 0;
    for (int i = 0; i < n; i++) v = (v << 8) | p[i];
    return v;
}

static inline void p4n_st(uint8_t *p, u64 v, int n) {
    for (int i = n - 1; i >= 0; i--) { p[i] = (uint8_t)v; v >>= 8; }
}

/* Write the low w bits of v at bit offset off of a zeroed buffer. */
static inline void p4n_put_bits(uint8_t *d, u64 off, u64 v, int w) {
    while (w > 0) {
        int bit = (int)(off & 7);
        int room = 8 - bit;
        int take = w < room ? w : room;
        u64 part = (v >> (w - take)) & ((1u << take) - 1);
        d[off >> 3] |= (uint8_t)(part << (room - take));
        off += take;
        w -= take;
    }
}

/* Internet checksum (RFC 1071, BMv2 csum16) over fields serialised MSB first. */
static u64 p4n_csum16(const u64 *v, const int *w, int n) {
    uint8_t buf[256];
    memset(buf, 0, sizeof buf);
    u64 off = 0;
    for (int i = 0; i < n; i++) { p4n_put_bits(buf, off, v[i], w[i]); off += w[i]; }
    u64 bytes = (off + 15) / 16 * 2;
    u64 sum = 0;
    for (u64 i = 0; i < bytes; i += 2) sum += ((u64)buf[i] << 8) | buf[i + 1];
    while (sum >> 16) sum = (sum & 0xFFFF) + (sum >> 16);
    return (~sum) & 0xFFFF;
}
