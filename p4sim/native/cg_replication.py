"""Clone, resubmit and recirculate in the C generator: the calls, the preserved field
lists, and the packet's work queues that run what they spawn.

A call only records a request (``p4n_clone_req``/``p4n_resub_req``/``p4n_recirc_req``
with the session and field list), as the Python back end's ``Ctx`` does; the pipeline
acts on it where v1model says: the end of ingress (I2E clone, then resubmit, multicast,
drop, unicast) or of egress (E2E clone, drop, deparse, recirculate or output). A
program that makes none of these calls keeps the straight pipeline (``cg_pipeline.PIPELINE``);
one that does gets ``QUEUED``, the Python ``Pipeline._run`` loop in C: an ingress and an
egress FIFO per packet, every ingress job run before the next egress job.

Preserved metadata: the whole user metadata struct is copied when the request is acted
on, and ``p4n_fl_restore`` copies the list's fields (``@field_list(N)``, or the fields a
deprecated ``resubmit(data)`` names) into the new packet's fresh metadata.

Example: ``resubmit_preserving_field_list(1);`` → ``p4n_resub_req = 1; p4n_resub_fl = 1;``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from p4sim.compiler.typecheck import TBit, TComposite, annotation
from p4sim.frontend import ast
from p4sim.native.cvalues import Unsupported, V

if TYPE_CHECKING:
    from p4sim.compiler.typecheck import GlobalEnv

_CALLS = (
    "clone",
    "clone3",
    "clone_preserving_field_list",
    "resubmit",
    "resubmit_preserving_field_list",
    "recirculate",
    "recirculate_preserving_field_list",
)


class ReplicationMixin:
    """The C generator's clone/resubmit/recirculate (see the module docstring)."""

    if TYPE_CHECKING:  # the C generator's own (p4sim/native/cgen.py)
        genv: GlobalEnv
        cur: Any
        meta_t: TComposite | None

        def expr(self, e: ast.Expr, expect: Any = None) -> V: ...
        def value(self, e: ast.Expr, t: Any) -> V: ...
        def ctype(self, t: Any) -> str: ...

    #: field list id → C member paths in the metadata struct (``f_a.f_b``); None until a
    #: replicating call is generated (the program then gets the queued pipeline)
    field_lists: dict[int, list[str]] | None = None

    def replication_call(self, name: str, args: list[ast.Expr]) -> list[str] | None:
        """C statements recording a clone/resubmit/recirculate request; None for other
        calls."""
        if name not in _CALLS:
            return None
        if self.field_lists is None:
            self.field_lists = self._annotated_field_lists()
        if name.startswith("clone"):
            sid = self.value(args[1], TBit(32)).code
            if name == "clone":
                fl = "0"
            elif name == "clone3":
                fl = str(self._data_field_list(args[2]))
            else:
                fl = str(self._const(args[2]))
            return [f"p4n_clone_req = 1; p4n_clone_sid = {sid}; p4n_clone_fl = {fl};"]
        kind = "resub" if name.startswith("resubmit") else "recirc"
        if name.endswith("_preserving_field_list"):
            fl = str(self._const(args[0]))
        else:
            fl = str(self._data_field_list(args[0]))
        return [f"p4n_{kind}_req = 1; p4n_{kind}_fl = {fl};"]

    def _const(self, e: ast.Expr) -> int:
        try:
            return int(self.genv.const_int(e))
        except Exception:
            raise Unsupported("a field list index that is not a constant") from None

    def _annotated_field_lists(self) -> dict[int, list[str]]:
        """``@field_list(N)`` on the user metadata's fields (nested structs included)."""
        lists: dict[int, list[str]] = {}

        def walk(t: TComposite, prefix: str) -> None:
            annos_all = t.field_annotations or [()] * len(t.fields)
            for (n, ft), annos in zip(t.fields, annos_all, strict=False):
                path = f"{prefix}f_{n}"
                a = annotation(list(annos), "field_list")
                if a is not None:
                    for arg in a.args:
                        lists.setdefault(self._const(arg), []).append(path)
                if isinstance(ft, TComposite) and ft.kind == "struct":
                    walk(ft, path + ".")

        if self.meta_t is not None:
            walk(self.meta_t, "")
        return lists

    def _data_field_list(self, data: ast.Expr) -> int:
        """A field list for ``resubmit(data)`` and kin: the user metadata fields ``data``
        names (others are not kept), as the Python back end's ``data_field_list``."""
        assert self.field_lists is not None
        meta = self._meta_code()
        paths: list[str] = []
        for e in data.elems if isinstance(data, ast.ListExpr) else [data]:
            v = self.expr(e)
            if meta and v.code == meta and isinstance(v.type, TComposite):
                paths += [f"f_{n}" for n, _ in v.type.fields]
            elif meta and v.code.startswith(meta + "."):
                paths.append(v.code[len(meta) + 1 :])
        idx = -(len([k for k in self.field_lists if k < 0]) + 1)
        self.field_lists[idx] = paths
        return idx

    def _meta_code(self) -> str | None:
        """The C code of the current control's user metadata parameter."""
        c = self.cur
        if c is None:
            return None
        for p in c.decl.params:
            if self.genv.resolve(p.type) is self.meta_t:
                v = c.scope.get(p.name)
                return v.code if v is not None else None
        return None

    def field_list_restore(self, mn: str) -> str:
        """``p4n_fl_restore(id, dst, src)``: the list's fields from src into dst."""
        lines = [f"static void p4n_fl_restore(int64_t id, {mn} *dst, const {mn} *src) {{"]
        for idx, paths in sorted((self.field_lists or {}).items()):
            copies = " ".join(f"dst->{p} = src->{p};" for p in paths)
            lines.append(f"    if (id == {idx}) {{ {copies} return; }}")
        lines.append("}")
        return "\n".join(lines)


#: Always in the generated program: the requests (set by the calls above) and the clone
#: sessions as the Python side lays them out (NativePipeline._layout_groups).
REQUESTS = """
typedef struct { u64 sid, trunc; int64_t n; u64 *ports, *rids; } p4n_clone_t;
static p4n_clone_t *p4n_clones; static int64_t p4n_nclones;
void p4n_set_clones(p4n_clone_t *c, int64_t n) { p4n_clones = c; p4n_nclones = n; }
int p4n_max_passes = 32;  /* Pipeline.max_passes */
static int p4n_clone_req, p4n_resub_req, p4n_recirc_req;
static u64 p4n_clone_sid;
static int64_t p4n_clone_fl, p4n_resub_fl, p4n_recirc_fl;
"""

#: The pipeline of a program that clones, resubmits or recirculates (formatted like
#: cg_pipeline.PIPELINE, whose declarations and egress come first; {fl_restore} is
#: p4n_fl_restore).
QUEUED = """
{fl_restore}
typedef struct {{ const uint8_t *data; u64 len, port, itype, passes; int64_t fl; {M} flm; }}
    p4n_ijob;
typedef struct {{ p4n_state st; const uint8_t *payload; u64 plen, port, passes, trunc; }}
    p4n_ejob;
#define P4N_MAXJOBS 65536  /* per packet; beyond, what is spawned is dropped */
static p4n_ijob *p4n_iq; static u64 p4n_iq_cap, p4n_iq_head, p4n_iq_tail;
static p4n_ejob *p4n_eq; static u64 p4n_eq_cap, p4n_eq_head, p4n_eq_tail;
static uint8_t **p4n_bufs; static u64 p4n_nbufs, p4n_bufs_cap;  /* recirculated frames */

static void *p4n_grow(void *q, u64 *cap, u64 tail, size_t size) {{
    if (tail < *cap) return q;
    if (tail >= P4N_MAXJOBS) return NULL;
    u64 nc = *cap ? *cap * 2 : 16;
    void *g = realloc(q, nc * size);
    if (g) *cap = nc;
    return g;
}}
static p4n_ijob *p4n_ipush(void) {{
    p4n_ijob *q = p4n_grow(p4n_iq, &p4n_iq_cap, p4n_iq_tail, sizeof *q);
    if (!q) return NULL;
    p4n_iq = q; return &p4n_iq[p4n_iq_tail++];
}}
static p4n_ejob *p4n_epush(void) {{
    p4n_ejob *q = p4n_grow(p4n_eq, &p4n_eq_cap, p4n_eq_tail, sizeof *q);
    if (!q) return NULL;
    p4n_eq = q; return &p4n_eq[p4n_eq_tail++];
}}
static uint8_t *p4n_newbuf(void) {{
    uint8_t **b = p4n_grow(p4n_bufs, &p4n_bufs_cap, p4n_nbufs, sizeof *b);
    if (!b) return NULL;
    p4n_bufs = b;
    uint8_t *d = malloc(P4N_MAXPKT);
    if (d) p4n_bufs[p4n_nbufs++] = d;
    return d;
}}
static p4n_clone_t *p4n_clone_find(u64 sid) {{
    for (int64_t i = 0; i < p4n_nclones; i++) if (p4n_clones[i].sid == sid) return &p4n_clones[i];
    return NULL;
}}

/* Parse data into st (its metadata set by the caller); the payload: what was not parsed. */
static void p4n_parse_into(p4n_state *st, const uint8_t *data, u64 len,
                           const uint8_t **payload, u64 *plen) {{
    {S} *s0 = &st->s;
    p4n_sm = s0; p4n_pktlen = len;
    p4n_in = data; p4n_inlen = len; p4n_off = 0; p4n_perr = {noerror}; p4n_rej = 0;
    {parse_call}
    if (p4n_perr != {noerror}) s0->f_parser_error = p4n_perr;
    u64 pstart = p4n_off >> 3;
    *payload = data + (pstart < len ? pstart : len);
    *plen = pstart < len ? len - pstart : 0;
}}

/* I2E: the packet as received, parsed again, fresh metadata but the field list's. */
static void p4n_clone_i2e(const p4n_ijob *job, const {M} *m, u64 sid, int64_t fl) {{
    p4n_clone_t *c = p4n_clone_find(sid);
    if (!c) return;
    for (int64_t r = 0; r < c->n; r++) {{
        p4n_ejob *e = p4n_epush();
        if (!e) return;
        memset(&e->st, 0, sizeof e->st);
        e->st.s.f_ingress_port = job->port; e->st.s.f_packet_length = job->len;
        e->st.s.f_parser_error = {noerror};
        p4n_parse_into(&e->st, job->data, job->len, &e->payload, &e->plen);
        if (fl) p4n_fl_restore(fl, &e->st.m, m);
        e->st.s.f_instance_type = 1; e->st.s.f_egress_rid = c->rids[r];
        e->port = c->ports[r]; e->passes = job->passes; e->trunc = c->trunc;
    }}
}}

static void p4n_run_ingress(const p4n_ijob *job, u64 now) {{
    memset(&p4n_ing, 0, sizeof p4n_ing);
    {S} *s0 = &p4n_ing.s;
    s0->f_ingress_port = job->port; s0->f_packet_length = job->len;
    s0->f_instance_type = job->itype; s0->f_parser_error = {noerror};
    p4n_sm = s0;
    {ingress_ts}
    if (job->itype != 0) p4n_fl_restore(job->fl, &p4n_ing.m, &job->flm);
    p4n_trunc = 0; p4n_clone_req = p4n_resub_req = p4n_recirc_req = p4n_dg_req = 0;
    const uint8_t *payload; u64 plen;
    p4n_parse_into(&p4n_ing, job->data, job->len, &payload, &plen);
    p4n_sm = s0; p4n_pktlen = job->len;
    p4n_pl = payload; p4n_pllen = plen;
    if (setjmp(p4n_exit) == 0) {verify}(&p4n_ing.h, &p4n_ing.m);
    if (setjmp(p4n_exit) == 0) {ingress}(&p4n_ing.h, &p4n_ing.m, s0);
    p4n_digest_flush();
    u64 trunc = p4n_trunc;
    int resub = p4n_resub_req; int64_t resub_fl = p4n_resub_fl;
    if (p4n_clone_req) p4n_clone_i2e(job, &p4n_ing.m, p4n_clone_sid, p4n_clone_fl);
    if (resub) {{
        if (job->passes + 1 > (u64)p4n_max_passes) return;
        p4n_ijob *j = p4n_ipush();
        if (!j) return;
        *j = *job;
        j->itype = 6; j->passes = job->passes + 1; j->fl = resub_fl; j->flm = p4n_ing.m;
        return;
    }}
    if (s0->f_mcast_grp != 0) {{
        u64 g = s0->f_mcast_grp;
        if ((int64_t)g >= p4n_ngroups) return;
        p4n_group *grp = &p4n_groups[g];
        for (int64_t r = 0; r < grp->n; r++) {{
            p4n_ejob *e = p4n_epush();
            if (!e) return;
            e->st = p4n_ing;
            e->st.s.f_egress_rid = grp->rids[r]; e->st.s.f_instance_type = 5;
            e->payload = payload; e->plen = plen; e->port = grp->ports[r];
            e->passes = job->passes; e->trunc = 0;
        }}
        return;
    }}
    if (s0->f_egress_spec == 511) return;
    p4n_ejob *e = p4n_epush();
    if (!e) return;
    e->st = p4n_ing; e->payload = payload; e->plen = plen; e->port = s0->f_egress_spec;
    e->passes = job->passes; e->trunc = trunc;
}}

/* E2E: the headers as egress left them, fresh metadata but the field list's. */
static void p4n_clone_e2e(const p4n_ejob *job, u64 sid, int64_t fl) {{
    p4n_clone_t *c = p4n_clone_find(sid);
    if (!c || job->passes + 1 > (u64)p4n_max_passes) return;
    for (int64_t r = 0; r < c->n; r++) {{
        p4n_ejob *e = p4n_epush();
        if (!e) return;
        memset(&e->st, 0, sizeof e->st);
        e->st.h = p4n_eg.h;
        if (fl) p4n_fl_restore(fl, &e->st.m, &p4n_eg.m);
        e->st.s.f_instance_type = 2;
        e->st.s.f_ingress_port = p4n_eg.s.f_ingress_port;
        e->st.s.f_packet_length = p4n_eg.s.f_packet_length;
        e->st.s.f_egress_rid = c->rids[r];
        e->payload = job->payload; e->plen = job->plen; e->port = c->ports[r];
        e->passes = job->passes + 1; e->trunc = c->trunc;
    }}
}}

/* One egress job (p4n_eq[k]); a frame out at out (1) or not (0). */
static int p4n_run_egress(u64 k, u64 now, uint8_t *out, u64 *olen) {{
    p4n_ejob job = p4n_eq[k];
    p4n_eg = job.st;
    {S} *s = &p4n_eg.s;
    s->f_egress_port = job.port; s->f_egress_spec = 0; p4n_trunc = 0;
    p4n_clone_req = p4n_resub_req = p4n_recirc_req = 0;
    {egress_ts}
    {enq_ts}
    p4n_sm = s; p4n_pktlen = s->f_packet_length;
    if (setjmp(p4n_exit) == 0) {egress}(&p4n_eg.h, &p4n_eg.m, s);
    if (p4n_clone_req) p4n_clone_e2e(&job, p4n_clone_sid, p4n_clone_fl);
    if (s->f_egress_spec == 511) return 0;
    p4n_pl = job.payload; p4n_pllen = job.plen;
    if (setjmp(p4n_exit) == 0) {compute}(&p4n_eg.h, &p4n_eg.m);
    int recirc = p4n_recirc_req; int64_t recirc_fl = p4n_recirc_fl;
    u64 cut = p4n_trunc ? p4n_trunc : job.trunc;  /* egress's own truncate, else ingress's */
    uint8_t *dst = recirc ? p4n_newbuf() : out;
    if (!dst) return 0;
    memset(dst, 0, 2048);
    p4n_out = dst; p4n_ooff = 0;
    {deparser}(NULL, &p4n_eg.h);
    u64 hb = (p4n_ooff + 7) >> 3;
    if (hb + job.plen > P4N_MAXPKT) return 0;
    memcpy(dst + hb, job.payload, job.plen);
    u64 len = hb + job.plen;
    if (recirc) {{
        if (job.passes + 1 > (u64)p4n_max_passes) return 0;
        p4n_ijob *j = p4n_ipush();
        if (!j) return 0;
        j->data = dst; j->len = len; j->port = s->f_ingress_port; j->itype = 4;
        j->passes = job.passes + 1; j->fl = recirc_fl; j->flm = p4n_eg.m;
        return 0;
    }}
    if (cut && cut < len) len = cut;
    *olen = len;
    return 1;
}}

/* One packet and everything it spawns, as Pipeline._run: every ingress job, then one
 * egress job, until both queues are empty. */
int p4n_process(u64 port, const uint8_t *data, u64 len, u64 now, uint8_t *out,
                u64 *oports, u64 *olens, int max) {{
    static uint8_t sink[P4N_MAXPKT];  /* frames beyond max: run, not kept */
    p4n_iq_head = p4n_iq_tail = p4n_eq_head = p4n_eq_tail = 0;
    p4n_now = now;
    p4n_ijob *first = p4n_ipush();
    if (!first) return 0;
    memset(first, 0, sizeof *first);
    first->data = data; first->len = len; first->port = port;
    int n = 0;
    while (p4n_iq_head < p4n_iq_tail || p4n_eq_head < p4n_eq_tail) {{
        while (p4n_iq_head < p4n_iq_tail) {{
            p4n_ijob job = p4n_iq[p4n_iq_head++];
            p4n_run_ingress(&job, now);
        }}
        if (p4n_eq_head < p4n_eq_tail) {{
            u64 k = p4n_eq_head++;
            u64 eport = p4n_eq[k].port, olen = 0;
            uint8_t *o = n < max ? out + (u64)n * P4N_MAXPKT : sink;
            if (p4n_run_egress(k, now, o, &olen) && n < max) {{
                oports[n] = eport; olens[n] = olen; n++;
            }}
        }}
    }}
    for (u64 i = 0; i < p4n_nbufs; i++) free(p4n_bufs[i]);
    p4n_nbufs = 0;
    return n;
}}
"""
