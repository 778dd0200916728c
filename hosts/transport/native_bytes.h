/* Helpers every host packet loop in C shares (native_window.c, and netreduce's native_ps.c
 * and native_ring.c): big-endian fields of the INC header and a monotonic clock.
 * hosts/transport/native_window.py's library() puts this text in place of the line
 * `#include "native_bytes.h"` before it compiles a loop, so the build cache's hash covers it. */
#include <stdint.h>
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
