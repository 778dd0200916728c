"""The C that frames every generated program: the v1model pipeline's state and the
control plane's hooks, the packet loop (recvmmsg per port, the frames run, sendmmsg out,
optionally with UDP segmentation offload) and the straight per-packet process of a
program that neither clones, resubmits nor recirculates (``SIMPLE``; the other one is
``cg_replication.QUEUED``). ``cgen.Generator.assemble`` fills them in.
"""

PIPELINE = """
/* ---- the v1model pipeline (p4sim/v1model/pipeline.py, without digests and queues,
 * which the generator refuses) ---- */
typedef struct {{ {H} h; {M} m; {S} s; }} p4n_state;
static p4n_state p4n_ing, p4n_eg;

/* Register cells, counters, tables and groups: pointers set by the Python side. */
int p4n_nregs = {nregs}, p4n_ncounters = {ncounters};
void p4n_set_register(int n, u64 *cells) {{
    u64 **r[] = {{ REGS_ }}; if (n < {nregs}) *r[n] = cells; }}
void p4n_set_counter(int n, u64 *cells) {{
    u64 **k[] = {{ CNTS_ }}; if (n < {ncounters}) *k[n] = cells; }}
p4n_table *p4n_table_at(int n) {{ return &p4n_tables[n]; }}
void p4n_set_groups(p4n_group *g, int64_t n) {{ p4n_groups = g; p4n_ngroups = n; }}

/* One mutex covers every use of the packet state and of the table/group layout: the C
 * loop's batches, and the Python side's packets and layout changes (p4n_lock). */
static pthread_mutex_t p4n_mu = PTHREAD_MUTEX_INITIALIZER;
void p4n_lock(void) {{ pthread_mutex_lock(&p4n_mu); }}
void p4n_unlock(void) {{ pthread_mutex_unlock(&p4n_mu); }}
/* Set by the Python side when the control plane changed a table or group: the C loop
 * returns before its next batch so that the change is laid out first. */
volatile int p4n_dirty;

{process}
/* ---- the packet loop's hot part: receive a batch per port (recvmmsg), run each frame,
 * send what leaves per egress port in order (sendmmsg). p4sim/native/backend.py
 * serve() polls, takes the switch lock and calls p4n_drain. ---- */
#define P4N_RXB 32
#define P4N_TXQ 128
#define P4N_NPORTS 512
static int p4n_port_fd[P4N_NPORTS];
static int p4n_ports_init;
/* per port: rx packets, rx bytes, tx packets, tx bytes, tx errors, truncated */
u64 p4n_stats[P4N_NPORTS * 6];
static uint8_t *p4n_rxbuf, *p4n_txbuf;
static struct mmsghdr p4n_rmsg[P4N_RXB];
static struct iovec p4n_riov[P4N_RXB];
static u64 p4n_tport[P4N_TXQ], p4n_tlen[P4N_TXQ];
static int p4n_tq;

static struct sockaddr_ll p4n_addr[P4N_NPORTS];
static int p4n_txfd = -1;

void p4n_set_port(int port, int fd, int ifindex) {{
    if (!p4n_ports_init) {{
        for (int i = 0; i < P4N_NPORTS; i++) p4n_port_fd[i] = -1;
        p4n_ports_init = 1;
    }}
    if (port < 0 || port >= P4N_NPORTS) return;
    p4n_port_fd[port] = fd;
    memset(&p4n_addr[port], 0, sizeof p4n_addr[port]);
    p4n_addr[port].sll_family = AF_PACKET;
    p4n_addr[port].sll_protocol = htons(ETH_P_ALL);
    p4n_addr[port].sll_ifindex = ifindex;
    p4n_addr[port].sll_halen = 6;
    if (p4n_txfd < 0) p4n_txfd = fd;
}}

static int p4n_alloc(void) {{
    if (p4n_rxbuf) return 1;
    p4n_rxbuf = malloc((size_t)P4N_RXB * P4N_MAXPKT);
    p4n_txbuf = malloc((size_t)P4N_TXQ * P4N_MAXPKT);
    if (!p4n_rxbuf || !p4n_txbuf) return 0;
    for (int i = 0; i < P4N_RXB; i++) {{
        p4n_riov[i].iov_base = p4n_rxbuf + (size_t)i * P4N_MAXPKT;
        p4n_riov[i].iov_len = P4N_MAXPKT;
        memset(&p4n_rmsg[i], 0, sizeof p4n_rmsg[i]);
        p4n_rmsg[i].msg_hdr.msg_iov = &p4n_riov[i];
        p4n_rmsg[i].msg_hdr.msg_iovlen = 1;
    }}
    return 1;
}}

/* Everything queued, in order, in one sendmmsg: each message is addressed to its port's
 * interface (sockaddr_ll), so one system call serves every egress port. */
static void p4n_flush_frames(void) {{
    static struct mmsghdr m[P4N_TXQ];
    static struct iovec v[P4N_TXQ];
    static u64 port_of[P4N_TXQ];
    int k = 0;
    for (int b = 0; b < p4n_tq; b++) {{
        u64 port = p4n_tport[b];
        if (port >= P4N_NPORTS || p4n_port_fd[port] < 0) continue;  /* no interface: dropped */
        v[k].iov_base = p4n_txbuf + (size_t)b * P4N_MAXPKT;
        v[k].iov_len = p4n_tlen[b];
        memset(&m[k], 0, sizeof m[k]);
        m[k].msg_hdr.msg_iov = &v[k];
        m[k].msg_hdr.msg_iovlen = 1;
        m[k].msg_hdr.msg_name = &p4n_addr[port];
        m[k].msg_hdr.msg_namelen = sizeof p4n_addr[port];
        port_of[k] = port;
        k++;
    }}
    int i = 0;
    while (i < k) {{
        int r = sendmmsg(p4n_txfd, &m[i], (unsigned)(k - i), MSG_DONTWAIT);
        if (r <= 0) {{ p4n_stats[port_of[i] * 6 + 4] += 1; i += 1; continue; }}
        for (int j = i; j < i + r; j++) {{
            p4n_stats[port_of[j] * 6 + 2] += 1;
            p4n_stats[port_of[j] * 6 + 3] += v[j].iov_len;
        }}
        i += r;
    }}
    p4n_tq = 0;
}}

/* ---- UDP segmentation offload on the way out (opt-in: p4n_set_gso, P4SIM_UDP_GSO). Runs of
 * frames to one port that differ only in their UDP payload and in the fields segmentation
 * rewrites (IPv4 total length, identification and checksum; UDP length and checksum) leave
 * as one frame with a virtio_net_hdr saying how to cut it (UDP_L4, the first frame's payload
 * length): the kernel then delivers the run to a receiving UDP socket once, as one datagram
 * per frame (cut where it is delivered, with identification counting up from the first
 * frame's and UDP checksums computed) or, to a socket with UDP_GRO, whole. What a capture on
 * the link sees is the run as one frame: hence opt-in. ---- */
#define P4N_GSO_MAX 64        /* frames per run */
#define P4N_GSO_BYTES 65000   /* payload bytes per run: the IPv4 total length must fit */
static int p4n_gsofd = -1;
void p4n_set_gso(int fd) {{ p4n_gsofd = fd; }}

static inline u64 p4n_be16(const uint8_t *p) {{ return (u64)p[0] << 8 | p[1]; }}
static inline void p4n_put16(uint8_t *p, u64 v) {{ p[0] = (uint8_t)(v >> 8); p[1] = (uint8_t)v; }}

/* The UDP payload length of an IPv4 UDP frame without options or fragments, else -1. */
static int64_t p4n_udp_payload(const uint8_t *f, u64 len) {{
    if (len < 42 || f[12] != 0x08 || f[13] != 0x00 || f[14] != 0x45 || f[23] != 17) return -1;
    if ((f[20] & 0x3f) || f[21] || p4n_be16(f + 16) != len - 14 || p4n_be16(f + 38) != len - 34)
        return -1;
    return (int64_t)len - 42;
}}

/* b may follow a in a run: the same bytes but for the fields segmentation rewrites. */
static int p4n_same_flow(const uint8_t *a, const uint8_t *b) {{
    return !memcmp(a, b, 16) && !memcmp(a + 20, b + 20, 4) && !memcmp(a + 26, b + 26, 12);
}}

static u64 p4n_sum16(const uint8_t *p, int n, u64 s) {{
    for (int i = 0; i + 1 < n; i += 2) s += p4n_be16(p + i);
    while (s >> 16) s = (s & 0xffff) + (s >> 16);
    return s;
}}

/* The run's first frame becomes its header: lengths for the whole payload, the IPv4
 * checksum again, and the UDP checksum field the pseudo-header's sum (CHECKSUM_PARTIAL). */
static void p4n_gso_header(uint8_t *f, u64 payload) {{
    p4n_put16(f + 16, 28 + payload);
    p4n_put16(f + 24, 0);
    p4n_put16(f + 24, 0xffff - p4n_sum16(f + 14, 20, 0));
    p4n_put16(f + 38, 8 + payload);
    u64 s = p4n_sum16(f + 26, 8, 17 + 8 + payload);
    p4n_put16(f + 40, s);
}}

typedef struct {{ uint8_t flags, gso_type; uint16_t hdr_len, gso_size, csum_start, csum_offset; }}
    p4n_vnet;

static void p4n_flush_gso(void) {{
    static struct mmsghdr m[P4N_TXQ];
    static struct iovec v[P4N_TXQ * (P4N_GSO_MAX + 1)];  /* per message: header, frames */
    static p4n_vnet vh[P4N_TXQ];
    static u64 port_of[P4N_TXQ], frames_of[P4N_TXQ], bytes_of[P4N_TXQ];
    /* per port, its open run: message index, or -1; its segment size; whether it is shut */
    static int open_msg[P4N_NPORTS];
    static int64_t seg[P4N_NPORTS], runpay[P4N_NPORTS];
    static char shut[P4N_NPORTS];
    static int ready;
    if (!ready) {{ for (int i = 0; i < P4N_NPORTS; i++) open_msg[i] = -1; ready = 1; }}
    int k = 0;
    u64 used[P4N_TXQ];
    int nused = 0;
    for (int b = 0; b < p4n_tq; b++) {{
        u64 port = p4n_tport[b];
        if (port >= P4N_NPORTS || p4n_port_fd[port] < 0) continue;  /* no interface: dropped */
        uint8_t *f = p4n_txbuf + (size_t)b * P4N_MAXPKT;
        u64 len = p4n_tlen[b];
        int64_t pay = p4n_udp_payload(f, len);
        int o = open_msg[port];
        if (o >= 0 && pay > 0 && !shut[port] && pay <= seg[port] && frames_of[o] < P4N_GSO_MAX
            && runpay[port] + pay <= P4N_GSO_BYTES
            && p4n_same_flow(m[o].msg_hdr.msg_iov[1].iov_base, f)) {{
            struct iovec *iv = &m[o].msg_hdr.msg_iov[m[o].msg_hdr.msg_iovlen++];
            iv->iov_base = f + 42; iv->iov_len = (size_t)pay;  /* joins the run: its payload */
            frames_of[o]++; bytes_of[o] += len; runpay[port] += pay;
            if (pay < seg[port]) shut[port] = 1;  /* only the last segment may be short */
            continue;
        }}
        /* a message of its own, which later frames to this port may join */
        memset(&m[k], 0, sizeof m[k]);
        memset(&vh[k], 0, sizeof vh[k]);
        struct iovec *iv = &v[(size_t)k * (P4N_GSO_MAX + 1)];
        iv[0].iov_base = &vh[k]; iv[0].iov_len = sizeof vh[k];
        iv[1].iov_base = f; iv[1].iov_len = len;
        m[k].msg_hdr.msg_iov = iv;
        m[k].msg_hdr.msg_iovlen = 2;
        m[k].msg_hdr.msg_name = &p4n_addr[port];
        m[k].msg_hdr.msg_namelen = sizeof p4n_addr[port];
        port_of[k] = port; frames_of[k] = 1; bytes_of[k] = len;
        if (open_msg[port] < 0) used[nused++] = port;
        open_msg[port] = pay > 0 ? k : -1;
        seg[port] = pay; runpay[port] = pay > 0 ? pay : 0; shut[port] = 0;
        k++;
    }}
    for (int i = 0; i < nused; i++) open_msg[used[i]] = -1;
    for (int i = 0; i < k; i++) {{
        if (frames_of[i] < 2) continue;
        uint8_t *f = m[i].msg_hdr.msg_iov[1].iov_base;
        int64_t first = (int64_t)m[i].msg_hdr.msg_iov[1].iov_len - 42;
        u64 total = (u64)first;
        for (size_t j = 2; j < m[i].msg_hdr.msg_iovlen; j++)
            total += m[i].msg_hdr.msg_iov[j].iov_len;
        p4n_gso_header(f, total);
        vh[i].flags = 1;     /* VIRTIO_NET_HDR_F_NEEDS_CSUM */
        vh[i].gso_type = 5;  /* VIRTIO_NET_HDR_GSO_UDP_L4 */
        vh[i].hdr_len = 42; vh[i].gso_size = (uint16_t)first;
        vh[i].csum_start = 34; vh[i].csum_offset = 6;
    }}
    int i = 0;
    while (i < k) {{
        int r = sendmmsg(p4n_gsofd, &m[i], (unsigned)(k - i), MSG_DONTWAIT);
        if (r <= 0) {{
            p4n_stats[port_of[i] * 6 + 4] += frames_of[i];
            if (frames_of[i] > 1 && errno == EINVAL) p4n_gsofd = -1;  /* refused: no more runs */
            i += 1;
            continue;
        }}
        for (int j = i; j < i + r; j++) {{
            p4n_stats[port_of[j] * 6 + 2] += frames_of[j];
            p4n_stats[port_of[j] * 6 + 3] += bytes_of[j];
        }}
        i += r;
    }}
    p4n_tq = 0;
}}

static void p4n_flush(void) {{
    if (p4n_gsofd >= 0) p4n_flush_gso(); else p4n_flush_frames();
}}

/* Up to budget frames from each of the n ports (fds[i] is switch port ports[i]);
 * returns the frames received, -1 when buffers cannot be allocated. */
static int p4n_drain(const int *fds, const u64 *ports, int n, int budget, u64 t0_ns,
                     const char *ready) {{
    int total = 0;
    for (int i = 0; i < n; i++) {{
        if (!ready[i]) continue;
        u64 *st = &p4n_stats[(ports[i] % P4N_NPORTS) * 6];
        for (int got = 0; got < budget;) {{
            int r = recvmmsg(fds[i], p4n_rmsg, P4N_RXB, MSG_DONTWAIT | MSG_TRUNC, NULL);
            if (r <= 0) break;
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            u64 now = ((u64)ts.tv_sec * 1000000000ULL + (u64)ts.tv_nsec - t0_ns) / 1000;
            pthread_mutex_lock(&p4n_mu);
            for (int j = 0; j < r; j++) {{
                u64 len = p4n_rmsg[j].msg_len;
                if (len > P4N_MAXPKT) {{ st[5] += 1; continue; }}
                st[0] += 1; st[1] += len;
                if (p4n_tq > P4N_TXQ - P4N_MAXOUT) p4n_flush();
                int k = p4n_process(ports[i], p4n_rxbuf + (size_t)j * P4N_MAXPKT, len, now,
                                    p4n_txbuf + (size_t)p4n_tq * P4N_MAXPKT,
                                    &p4n_tport[p4n_tq], &p4n_tlen[p4n_tq], P4N_TXQ - p4n_tq);
                p4n_tq += k;
            }}
            pthread_mutex_unlock(&p4n_mu);
            got += r; total += r;
            if (r < P4N_RXB) break;
        }}
    }}
    p4n_flush();
    return total;
}}

/* The loop: poll the n ports and wake_fd, drain the ready ports, until wake_fd is ready
 * (1), the control plane changed something of this program (p4n_dirty) or of any other in
 * the process (*wake: a new pipeline may be installed) (2), timeout_ms passed idle (0),
 * or an error (-1). The Python side then does what it must and calls again. */
int p4n_serve(const int *fds, const u64 *ports, int n, int wake_fd, int timeout_ms,
              int budget, u64 t0_ns, volatile int *wake) {{
    if (!p4n_alloc() || n > 256) return -1;
    struct pollfd pf[257];
    char ready[256];
    for (int i = 0; i < n; i++) {{ pf[i].fd = fds[i]; pf[i].events = POLLIN; }}
    pf[n].fd = wake_fd; pf[n].events = POLLIN;
    for (;;) {{
        if (p4n_dirty || *wake) return 2;
        int r = poll(pf, (nfds_t)(n + 1), timeout_ms);
        if (r < 0) {{ if (errno == EINTR) return 0; return -1; }}
        if (r == 0) return 0;
        if (pf[n].revents) return 1;
        if (p4n_dirty || *wake) return 2;
        for (int i = 0; i < n; i++) ready[i] = (pf[i].revents & (POLLIN | POLLERR)) != 0;
        p4n_drain(fds, ports, n, budget, t0_ns, ready);
    }}
}}
"""

#: p4n_process of a program that neither clones, resubmits nor recirculates: one
#: ingress pass, then egress for the unicast port or each multicast replica.
SIMPLE = """
/* One egress pass of the state in p4n_eg to port; 1 and the frame in out when it leaves. */
static int p4n_egress_pass(u64 port, u64 now, const uint8_t *payload, u64 plen,
                           uint8_t *out, u64 *olen, u64 cut) {{
    {S} *s = &p4n_eg.s;
    s->f_egress_port = port; s->f_egress_spec = 0; p4n_trunc = 0;
    {egress_ts}
    {enq_ts}
    p4n_sm = s; p4n_pktlen = s->f_packet_length;
    if (setjmp(p4n_exit) == 0) {egress}(&p4n_eg.h, &p4n_eg.m, s);
    if (s->f_egress_spec == 511) return 0;
    p4n_pl = payload; p4n_pllen = plen;
    if (setjmp(p4n_exit) == 0) {compute}(&p4n_eg.h, &p4n_eg.m);
    memset(out, 0, 2048);
    p4n_out = out; p4n_ooff = 0;
    {deparser}(NULL, &p4n_eg.h);
    u64 hb = (p4n_ooff + 7) >> 3;
    if (hb + plen > P4N_MAXPKT) return 0;
    memcpy(out + hb, payload, plen);
    *olen = hb + plen;
    if (p4n_trunc) cut = p4n_trunc;  /* egress's own truncate, else ingress's */
    if (cut && cut < *olen) *olen = cut;
    return 1;
}}

/* Run one packet to completion: up to max outputs, frame i at out + i * P4N_MAXPKT.
 * Returns the number of frames out. */
int p4n_process(u64 port, const uint8_t *data, u64 len, u64 now, uint8_t *out,
                u64 *oports, u64 *olens, int max) {{
    p4n_now = now; p4n_dg_req = 0;
    memset(&p4n_ing, 0, sizeof p4n_ing);
    {S} *s0 = &p4n_ing.s;
    s0->f_ingress_port = port; s0->f_packet_length = len; s0->f_instance_type = 0;
    s0->f_parser_error = {noerror};
    p4n_sm = s0; p4n_pktlen = len;
    {ingress_ts}
    p4n_in = data; p4n_inlen = len; p4n_off = 0; p4n_perr = {noerror}; p4n_rej = 0;
    p4n_trunc = 0;
    {parse_call}
    if (p4n_perr != {noerror}) s0->f_parser_error = p4n_perr;
    u64 pstart = p4n_off >> 3;
    const uint8_t *payload = data + (pstart < len ? pstart : len);
    u64 plen = pstart < len ? len - pstart : 0;
    p4n_pl = payload; p4n_pllen = plen;
    if (setjmp(p4n_exit) == 0) {verify}(&p4n_ing.h, &p4n_ing.m);
    if (setjmp(p4n_exit) == 0) {ingress}(&p4n_ing.h, &p4n_ing.m, s0);
    p4n_digest_flush();
    int n = 0;
    if (s0->f_mcast_grp != 0) {{
        u64 g = s0->f_mcast_grp;
        if ((int64_t)g >= p4n_ngroups) return 0;
        p4n_group *grp = &p4n_groups[g];
        for (int64_t r = 0; r < grp->n && n < max; r++) {{
            p4n_eg = p4n_ing;
            p4n_eg.s.f_egress_rid = grp->rids[r];
            p4n_eg.s.f_instance_type = 5;
            if (p4n_egress_pass(grp->ports[r], now, payload, plen,
                                out + (u64)n * P4N_MAXPKT, &olens[n], 0)) {{
                oports[n] = grp->ports[r]; n++;
            }}
        }}
        return n;
    }}
    if (s0->f_egress_spec == 511 || max < 1) return 0;
    p4n_eg = p4n_ing;
    if (p4n_egress_pass(s0->f_egress_spec, now, payload, plen, out, &olens[0], p4n_trunc)) {{
        oports[0] = s0->f_egress_spec; n = 1;
    }}
    return n;
}}
"""
