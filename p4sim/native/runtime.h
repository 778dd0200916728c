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
typedef unsigned __int128 u128;  /* bit<65> .. bit<128> */

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
    int64_t *range;  /* NULL, or per key 1 for a range key: (lo, hi) in (vals, masks) */
    /* An action profile's table: an entry naming a member holds the member's action and
     * data; one naming a group has action -2 and its group number as data, group g's
     * members are grp[2g + 1] rows from row grp[2g] of (mact, margs). */
    int64_t *grp, *mact;
    u64 *margs;
    /* A table with a direct meter: 9 doubles per entry (cg_stateful.py's p4n_meter),
     * and the meter's time origin. */
    double *meters;
    int64_t morigin;
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

/* int<W>: W-bit two's-complement patterns, read as signed where the operation needs it
 * (comparisons, division, >>, saturation), as the Python back end's rt.signed. */
static inline int64_t p4n_sx(u64 v, int w) {
    return w >= 64 ? (int64_t)v : (int64_t)(v << (64 - w)) >> (64 - w);
}
static inline int64_t p4n_sar(int64_t v, u64 n) { return v >> (n > 63 ? 63 : n); }
/* truncating toward zero (Python's _sdiv/_smod); x / 0 is 0 */
static inline int64_t p4n_sdiv(int64_t a, int64_t b) {
    if (b == 0) return 0;
    if (b == -1) return (int64_t)(0ULL - (u64)a);
    return a / b;
}
static inline int64_t p4n_smod(int64_t a, int64_t b) {
    if (b == 0 || b == -1) return 0;
    return a % b;
}
static inline u64 p4n_sat_add(u64 a, u64 b, int w, int sg) {
    u64 m = w >= 64 ? ~0ULL : (1ULL << w) - 1;
    if (!sg) { u64 r = a + b; return (r < a || r > m) ? m : r; }
    __int128 r = (__int128)p4n_sx(a, w) + p4n_sx(b, w);
    __int128 hi = ((__int128)1 << (w - 1)) - 1, lo = -((__int128)1 << (w - 1));
    return (u64)(r > hi ? hi : r < lo ? lo : r) & m;
}
static inline u64 p4n_sat_sub(u64 a, u64 b, int w, int sg) {
    u64 m = w >= 64 ? ~0ULL : (1ULL << w) - 1;
    if (!sg) return a > b ? a - b : 0;
    __int128 r = (__int128)p4n_sx(a, w) - p4n_sx(b, w);
    __int128 hi = ((__int128)1 << (w - 1)) - 1, lo = -((__int128)1 << (w - 1));
    return (u64)(r > hi ? hi : r < lo ? lo : r) & m;
}

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
    if (t->range) {
        for (int64_t e = 0; e < t->n; e++) {
            const u64 *v = t->vals + e * nk, *m = t->masks + e * nk;
            int64_t i = 0;
            for (; i < nk; i++) {
                if (t->range[i] ? (key[i] < v[i] || key[i] > m[i]) : (key[i] & m[i]) != v[i])
                    break;
            }
            if (i == nk) return e;
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

/* bit<65..128>: two reads and two writes of up to 64 bits. */
static inline u128 p4n_get_wide(const uint8_t *d, u64 off, int w) {
    return ((u128)p4n_get_bits(d, off, w - 64) << 64) | p4n_get_bits(d, off + w - 64, 64);
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

static inline void p4n_put_wide(uint8_t *d, u64 off, u128 v, int w) {
    p4n_put_bits(d, off, (u64)(v >> 64), w - 64);
    p4n_put_bits(d, off + w - 64, (u64)v, 64);
}

/* Fields serialised MSB first as BMv2 does (the last byte padded with zero bits); the
 * bytes written (buf holds 256). */
static u64 p4n_serialize(uint8_t *buf, const u64 *v, const int *w, int n) {
    memset(buf, 0, 256);
    u64 off = 0;
    for (int i = 0; i < n; i++) { p4n_put_bits(buf, off, v[i], w[i]); off += w[i]; }
    return (off + 7) / 8;
}

/* Internet checksum (RFC 1071, BMv2 csum16) of bytes (an odd last byte padded). */
static u64 p4n_csum16_bytes(const uint8_t *d, u64 n) {
    u64 sum = 0;
    for (u64 i = 0; i < n; i += 2) sum += ((u64)d[i] << 8) | (i + 1 < n ? d[i + 1] : 0);
    while (sum >> 16) sum = (sum & 0xFFFF) + (sum >> 16);
    return (~sum) & 0xFFFF;
}

static u64 p4n_csum16(const u64 *v, const int *w, int n) {
    uint8_t buf[256];
    u64 len = p4n_serialize(buf, v, w, n);
    return p4n_csum16_bytes(buf, len);
}

/* BMv2 "crc32" (CRC-32/ISO-HDLC) and "crc16" (CRC-16/ARC), reflected, table driven. */
static u64 p4n_crc(const uint8_t *d, u64 n, int is32) {
    static uint32_t t32[256], t16[256];
    static int ready;
    if (!ready) {
        for (uint32_t b = 0; b < 256; b++) {
            uint32_t r32 = b, r16 = b;
            for (int k = 0; k < 8; k++) {
                r32 = (r32 & 1) ? (r32 >> 1) ^ 0xEDB88320u : r32 >> 1;
                r16 = (r16 & 1) ? (r16 >> 1) ^ 0xA001u : r16 >> 1;
            }
            t32[b] = r32; t16[b] = r16;
        }
        ready = 1;
    }
    if (is32) {
        uint32_t reg = 0xFFFFFFFFu;
        for (u64 i = 0; i < n; i++) reg = t32[(reg ^ d[i]) & 0xFF] ^ (reg >> 8);
        return reg ^ 0xFFFFFFFFu;
    }
    uint32_t reg = 0;
    for (u64 i = 0; i < n; i++) reg = t16[(reg ^ d[i]) & 0xFF] ^ (reg >> 8);
    return reg & 0xFFFF;
}

/* The raw output of algorithm algo (cgen.ALGOS) over len bytes. */
static u64 p4n_algo(int algo, const uint8_t *buf, u64 len) {
    u64 h = 0;
    if (algo == 0) h = p4n_crc(buf, len, 1);
    else if (algo == 1) h = p4n_crc(buf, len, 0);
    else if (algo == 2) h = p4n_csum16_bytes(buf, len);
    else if (algo == 3) {  /* identity: the first (up to) 8 bytes, big-endian */
        for (u64 i = 0; i < len && i < 8; i++) h = (h << 8) | buf[i];
    } else {  /* xor16: XOR of big-endian 16-bit words, an odd last byte the high one */
        for (u64 i = 0; i < len; i += 2) h ^= ((u64)buf[i] << 8) | (i + 1 < len ? buf[i + 1] : 0);
    }
    return h;
}

/* A checksum extern's value: algo over the serialised fields, then pl (plen bytes:
 * the payload of the _with_payload forms). */
static u64 p4n_checksum(int algo, const u64 *v, const int *w, int n, const uint8_t *pl,
                        u64 plen) {
    static uint8_t buf[256 + P4N_MAXPKT];
    u64 len = p4n_serialize(buf, v, w, n);
    if (plen) memcpy(buf + len, pl, plen);
    return p4n_algo(algo, buf, len + plen);
}

/* v1model hash(): base + (h % max) in 64 bits, max 0 read as 1, cut to the result. */
static u64 p4n_hash(int algo, u64 base, const u64 *v, const int *w, int n, u64 max, int outw) {
    uint8_t buf[256];
    u64 len = p4n_serialize(buf, v, w, n);
    u64 h = p4n_algo(algo, buf, len);
    u64 size = max ? max : 1;
    u64 r = h % size + base;
    return outw >= 64 ? r : r & ((((u64)1) << outw) - 1);
}
