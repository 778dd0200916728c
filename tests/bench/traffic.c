/* The wire benchmark's paced sender and checking receiver, in C (tests/bench/traffic.py is
 * the same in Python, used where no C compiler is installed).
 *
 * Sender and receiver share the machine's cores with the switch under test; the less they
 * cost per frame, the more of the machine the switch gets, for every switch measured (BMv2
 * as p4sim). Same stdin/stdout protocol as traffic.py:
 *
 *   traffic send IFACES FRAMES MODE
 *       IFACES: comma-separated host-side interfaces, in the case's port order.
 *       FRAMES: a file of records (u8 interface index, u16 little-endian length, frame).
 *       MODE fixed: the records are sent in turn, over and over.
 *       MODE inc REGION: the records are the workers' psn-0 templates (one per interface);
 *           each round sends every worker's template with psn, agg_idx and ver patched
 *           (psn grows forever across steps: an older psn would be stale at the switch).
 *       stdin "RATE SECONDS" -> stdout "SENT": bursts of up to 32 frames per sendmmsg at
 *       each burst's due time, so the offered rate holds over any few milliseconds.
 *   traffic receive IFACES PORTS CHECK [ARG]
 *       PORTS: the switch port number of each interface (comma-separated).
 *       CHECK any: counted, not checked. CHECK equal HEX: every frame must be HEX.
 *       CHECK prefix HEX: the first 14 bytes and the length of HEX.
 *       CHECK inc WORKERS,JOB: an aggregation result: RESULT flag, the job, a full bitmap,
 *           worker id = port - 1, values i * (1 + ... + WORKERS).
 *       stdin "SECONDS" -> stdout "RECEIVED WRONG": frames that arrived within SECONDS; then
 *       late frames are discarded until the ports are quiet for 200 ms (at most 5 s).
 */
#define _GNU_SOURCE
#include "rawport.h"
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#define BURST 32
#define RX_BATCH 64
#define SLOT 2048
#define MAX_IFACES 8
#define MAX_RECORDS 4096
#define INC 42             /* the INC header's offset: Ethernet, IPv4, UDP */
#define DRAIN_QUIET_MS 200 /* after a step: late frames are discarded until this quiet */
#define DRAIN_MAX_S 5.0

static int open_ports(char *list, int *fds) {
    int n = 0;
    for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
        if (n == MAX_IFACES) return -1;
        fds[n] = open_port(tok);
        if (fds[n] < 0) {
            fprintf(stderr, "traffic: cannot open interface %s\n", tok);
            return -1;
        }
        n++;
    }
    return n;
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void put32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

static uint32_t get32(const uint8_t *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

struct record {
    int iface;
    int len;
    uint8_t data[SLOT];
};

static struct record records[MAX_RECORDS];

static int load(const char *path) {
    FILE *f = fopen(path, "rb");
    int n = 0;
    uint8_t head[3];
    if (!f) return -1;
    while (n < MAX_RECORDS && fread(head, 1, 3, f) == 3) {
        records[n].iface = head[0];
        records[n].len = head[1] | head[2] << 8;
        if (records[n].len > SLOT || fread(records[n].data, 1, (size_t)records[n].len, f) !=
                                         (size_t)records[n].len) {
            fclose(f);
            return -1;
        }
        n++;
    }
    fclose(f);
    return n;
}

static int send_main(char *ifaces, const char *frames, const char *mode, int region) {
    int fds[MAX_IFACES], nif = open_ports(ifaces, fds), nrec = load(frames);
    int inc = strcmp(mode, "inc") == 0, next = 0, worker = 0;
    uint32_t psn = 0;
    static uint8_t buf[MAX_IFACES][BURST][SLOT];
    struct mmsghdr msgs[MAX_IFACES][BURST];
    struct iovec iov[MAX_IFACES][BURST];
    double rate, seconds;
    if (nif <= 0 || nrec <= 0 || region < 1) {
        fprintf(stderr, "traffic: bad interfaces, frames file %s or region\n", frames);
        return 2;
    }
    for (int i = 0; i < nrec; i++)
        if (records[i].iface >= nif) {
            fprintf(stderr, "traffic: frame %d names interface %d of %d\n", i, records[i].iface,
                    nif);
            return 2;
        }
    memset(msgs, 0, sizeof msgs);
    for (int i = 0; i < nif; i++)
        for (int j = 0; j < BURST; j++) {
            iov[i][j].iov_base = buf[i][j];
            msgs[i][j].msg_hdr.msg_iov = &iov[i][j];
            msgs[i][j].msg_hdr.msg_iovlen = 1;
        }
    while (scanf("%lf %lf", &rate, &seconds) == 2) {
        double gap = BURST / rate, start = now_s(), due = start, end = start + seconds;
        long sent = 0;
        while (due < end) {
            double t = now_s();
            int count[MAX_IFACES] = {0};
            if (t < due) {
                double w = due - t < 0.002 ? due - t : 0.002;
                struct timespec ts = {0, (long)(w * 1e9)};
                nanosleep(&ts, NULL);
                continue;
            }
            for (int k = 0; k < BURST; k++) {
                struct record *r;
                uint8_t *out;
                if (inc) {
                    r = &records[worker];
                    out = buf[r->iface][count[r->iface]];
                    memcpy(out, r->data, (size_t)r->len);
                    out[INC + 5] = (uint8_t)(((psn / (uint32_t)region) & 1) << 7);
                    put32(out + INC + 8, psn);
                    put32(out + INC + 12, psn % (uint32_t)region);
                    if (++worker == nrec) {
                        worker = 0;
                        psn++;
                    }
                } else {
                    r = &records[next];
                    next = (next + 1) % nrec;
                    out = buf[r->iface][count[r->iface]];
                    memcpy(out, r->data, (size_t)r->len);
                }
                iov[r->iface][count[r->iface]].iov_len = (size_t)r->len;
                count[r->iface]++;
            }
            for (int i = 0; i < nif; i++) {
                int done = 0;
                while (done < count[i]) {
                    int m = sendmmsg(fds[i], &msgs[i][done], (unsigned)(count[i] - done), 0);
                    if (m <= 0) break; /* a full queue: the rest of this burst is lost */
                    done += m;
                }
                sent += done;
            }
            due += gap;
        }
        printf("%ld\n", sent);
        fflush(stdout);
    }
    return 0;
}

static int hexbytes(const char *hex, uint8_t *out) {
    int n = (int)strlen(hex) / 2;
    if (n > SLOT) return -1;
    for (int i = 0; i < n; i++) {
        unsigned v;
        if (sscanf(hex + 2 * i, "%2x", &v) != 1) return -1;
        out[i] = (uint8_t)v;
    }
    return n;
}

enum check { ANY, EQUAL, PREFIX, INC_RESULT };

static int receive_main(char *ifaces, char *ports, const char *check, const char *arg) {
    int fds[MAX_IFACES], port[MAX_IFACES], nif = open_ports(ifaces, fds), np = 0;
    static uint8_t expected[SLOT], buf[RX_BATCH][SLOT];
    int elen = 0, workers = 0, job = 0;
    enum check how = ANY;
    struct mmsghdr msgs[RX_BATCH];
    struct iovec iov[RX_BATCH];
    struct pollfd pfd[MAX_IFACES];
    double seconds;
    for (char *tok = strtok(ports, ","); tok && np < MAX_IFACES; tok = strtok(NULL, ","))
        port[np++] = atoi(tok);
    if (nif <= 0 || np != nif) {
        fprintf(stderr, "traffic: bad interfaces or ports\n");
        return 2;
    }
    if (strcmp(check, "equal") == 0 || strcmp(check, "prefix") == 0) {
        how = check[0] == 'e' ? EQUAL : PREFIX;
        if (!arg || (elen = hexbytes(arg, expected)) < 14) {
            fprintf(stderr, "traffic: %s needs the expected frame in hex\n", check);
            return 2;
        }
    } else if (strcmp(check, "inc") == 0) {
        how = INC_RESULT;
        if (!arg || sscanf(arg, "%d,%d", &workers, &job) != 2 || workers < 1 || workers > 32) {
            fprintf(stderr, "traffic: inc needs WORKERS,JOB\n");
            return 2;
        }
    }
    memset(msgs, 0, sizeof msgs);
    for (int i = 0; i < RX_BATCH; i++) {
        iov[i].iov_base = buf[i];
        msgs[i].msg_hdr.msg_iov = &iov[i];
        msgs[i].msg_hdr.msg_iovlen = 1;
    }
    for (int i = 0; i < nif; i++) {
        pfd[i].fd = fds[i];
        pfd[i].events = POLLIN;
    }
    printf("ready\n");
    fflush(stdout);
    while (scanf("%lf", &seconds) == 1) {
        double end = now_s() + seconds;
        long got = 0, wrong = 0;
        int32_t step = workers * (workers + 1) / 2;
        uint32_t full = workers == 32 ? 0xffffffffu : (1u << workers) - 1;
        while (now_s() < end) {
            if (poll(pfd, (nfds_t)nif, 50) <= 0) continue;
            for (int i = 0; i < nif; i++) {
                int n;
                if (!(pfd[i].revents & POLLIN)) continue;
                for (int k = 0; k < RX_BATCH; k++) iov[k].iov_len = SLOT;
                n = recvmmsg(fds[i], msgs, RX_BATCH, MSG_DONTWAIT, NULL);
                for (int k = 0; k < n; k++) {
                    const uint8_t *f = buf[k];
                    int len = (int)msgs[k].msg_len, ok = 1;
                    got++;
                    if (how == EQUAL)
                        ok = len == elen && memcmp(f, expected, (size_t)elen) == 0;
                    else if (how == PREFIX)
                        ok = len == elen && memcmp(f, expected, 14) == 0;
                    else if (how == INC_RESULT) {
                        ok = len == INC + 24 + 128 && (f[INC + 1] & 2) &&
                             (f[INC + 2] << 8 | f[INC + 3]) == job &&
                             f[INC + 4] == port[i] - 1 && get32(f + INC + 20) == full;
                        for (int v = 0; ok && v < 32; v++)
                            ok = (int32_t)get32(f + INC + 24 + 4 * v) == v * step;
                    }
                    wrong += !ok;
                }
            }
        }
        /* What is still queued belongs to this step, late: discard it until the ports are
         * quiet, so that it is not counted in the next step's window. */
        end = now_s() + DRAIN_MAX_S;
        while (now_s() < end && poll(pfd, (nfds_t)nif, DRAIN_QUIET_MS) > 0)
            for (int i = 0; i < nif; i++)
                if (pfd[i].revents & POLLIN) {
                    for (int k = 0; k < RX_BATCH; k++) iov[k].iov_len = SLOT;
                    recvmmsg(fds[i], msgs, RX_BATCH, MSG_DONTWAIT, NULL);
                }
        printf("%ld %ld\n", got, wrong);
        fflush(stdout);
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc >= 5 && strcmp(argv[1], "send") == 0)
        return send_main(argv[2], argv[3], argv[4], argc > 5 ? atoi(argv[5]) : 1);
    if (argc >= 5 && strcmp(argv[1], "receive") == 0)
        return receive_main(argv[2], argv[3], argv[4], argc > 5 ? argv[5] : NULL);
    fprintf(stderr,
            "usage: traffic send IFACES FRAMES fixed|inc [REGION]\n"
            "       traffic receive IFACES PORTS any|equal HEX|prefix HEX|inc WORKERS,JOB\n");
    return 2;
}
