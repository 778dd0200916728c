"""A replica of the replicated log with the switch as sequencer (``p4src/consensus.p4``).

Example (``replicated_log.py replica`` does this on each replica host)::

    rep = Replica(job_id, rid, replicas, clients, group_ip, key=control_key)
    rep.run(stop)                 # until stop[0]; rep.summary() is its log and counters

Protocol (docs/protocol.md, "Consensus"; NOPaxos' ordered unreliable multicast; replica
``view % n`` leads, replica 0 in view 0). A client sends a request (op ``CONSENSUS``,
``psn`` = its request id, slot 0 = length, slots 1..31 = up to 124 bytes) to the job's
multicast address; the switch stamps ``agg_idx`` = sequence number and ``epoch`` = session and
multicasts it to every replica. Replicas append requests in sequence order; entry ``seq``
of session ``S`` is log index ``base(S) + seq - 1`` where ``base(S)`` is the leader's log
length when it entered ``S``. Each replica answers the client with the index it used
(``agg_idx``) and its id and view (``bitmap``); the request is **committed** when the
client holds the view's leader's answer and ``f`` others of that view for the same
(session, index) (``f`` = replicas // 2). The client repeats a request until then (a
repeat is logged again; ``read`` drops repeats).

- Gap at the leader (a sequence number missing for ``GAP_WAIT``): it asks the followers
  (GAP); a follower that has the request sends it (HAVE), one that has not promises never to
  use it (NOOP_OK). With a HAVE the leader logs the request, with ``f`` promises a no-op; it
  tells every follower (DECIDE), and followers overwrite their entry with the decision.
  A leader never changes an entry, so a committed entry (the leader answered) stays. A
  follower confirms each decision (DECIDED); the leader repeats it to those that have not
  (the oldest ``REDECIDE`` each ``RETRY``), since a follower that lost it would keep the
  request or its promised no-op at that index for good.
- Gap at a follower: it asks the leader (FILL) for the decision. The leader's heartbeat
  (HB: session, next sequence number) shows followers a lost tail.
- Follower restart, or a new session (the switch restarted and the controller gave the
  group a new session number): the follower copies the leader's log (SYNC_REQ / SYNC,
  in chunks), buffering what the switch sends meanwhile, then continues. The leader enters
  a session when it first hears of it (from the switch or a follower).
- ``--sequencer host``: the baseline without the switch: clients send to the leader
  (``FALLBACK`` flag: the switch forwards), the leader numbers requests itself and sends
  them to the followers. Everything else is the same code, but the leader stays replica 0
  (its clients send to it alone): followers never change view, whatever they hear.

- Leader crash: followers that hear no heartbeat for ``LEADER_TIMEOUT`` move to the next
  view; its leader (replica ``view % n``) takes the VC messages of ``f + 1`` replicas,
  merges the logs of the newest session among them (a request wins over a no-op at an
  index) and sends the result to the others (START); a leader of an older session than that
  moves on to the next view. Answers carry the view; a commit needs the answers of one view.
  A replica that restarts empty copies the current leader's log and never leads from
  nothing; one with a log whose copy nobody answers joins a view change with its own.

A view change's messages (VC, START) carry the current session's entries in chunks of
``CHUNK`` entries, joined again at the receiver. Limit: the host-sequenced baseline keeps
replica 0 as its sequencer.
"""

from __future__ import annotations

import json
import select
import time
from dataclasses import dataclass, field
from typing import Any

from hosts.consensus.entry_log import EntryLog
from hosts.consensus.log_wire import (
    CHUNK,
    CONSENSUS,
    CTL_PORT,
    FALLBACK,
    HEADER_FIELDS,
    HOST_SESSION,
    MAX_DATA,
    NOOP,
    REQUEST_FIELDS,
    REQUEST_LEN,
    RESULT,
    RETRY,
    VIEW_SHIFT,
    WORD,
    ZERO_SLOTS,
    Entry,
    chunked,
    queued,
    udp_socket,
)
from hosts.consensus.native_replica import NativeRequests
from hosts.transport.control_mac import ControlMac
from wire.header import HEADER_LEN, INC_UDP_PORT, SLOTS
from wire.serial import newer

GAP_WAIT = 0.01  # a gap may be reordering: wait this long before asking
HEARTBEAT = 0.05
LEADER_TIMEOUT = 0.5  # a follower that hears nothing from the leader this long changes view
VIEW_CHANGE_TIMEOUT = 1.0  # a view change not done by then moves on to the next view ...
VC_CHUNK_TIME = 0.02  # ... plus this per chunk of the session's log (CHUNK entries)
BOOT_WAIT = 1.0  # replica 0 leads a new group if nobody with state answered by then
REDECIDE = 16  # the leader repeats at most this many unconfirmed decisions per RETRY


@dataclass
class Replica:
    """One replica's state machine and sockets (``run`` drives it)."""

    job_id: int
    rid: int
    replicas: list[dict[str, Any]]  # id, ip (index = id)
    clients: dict[int, str]  # client id -> IP
    group_ip: str | None  # None: --sequencer host
    log: EntryLog = field(default_factory=EntryLog)
    session: int | None = None
    port: int = INC_UDP_PORT  # requests and votes (HOST_PLAN_PORT for a log on hosts alone)
    base: int = 0
    next_seq: int = 1
    view: int = 0  # the leader is replica view % n
    pending: dict[int, Entry] = field(default_factory=dict)
    decided: set[int] = field(default_factory=set)
    syncing: bool = False
    fresh: bool = True  # no state yet (never synced, never led)
    changing: bool = False  # a view change is under way
    sync_log: list[Entry] = field(default_factory=list)
    early: list[tuple[int, int, Entry]] = field(default_factory=list)
    vc_logs: dict[int, dict[str, Any]] = field(default_factory=dict)
    parts: dict[tuple[str, int], dict[int, dict[str, Any]]] = field(default_factory=dict)
    heard: float = 0.0  # when the leader was last heard
    host_seq: int = 0
    timers: dict[str, float] = field(default_factory=dict)
    noop_ok: dict[int, set[int]] = field(default_factory=dict)
    unconfirmed: dict[int, set[int]] = field(default_factory=dict)  # leader: seq -> followers
    stats: dict[str, int] = field(default_factory=dict)
    key: bytes | None = field(default=None, repr=False)  # the job's control key

    def __post_init__(self) -> None:
        me = self.replicas[self.rid]["ip"]
        self.mac = ControlMac(self.key)
        self.req = udp_socket(self.port, self.group_ip, me)
        self.ctl = udp_socket(CTL_PORT)
        self.n = len(self.replicas)
        self.f = self.n // 2
        self.heard = time.monotonic()
        self.begin_sync()
        if self.rid == 0:  # a cold start of the group: nobody answers, replica 0 leads view 0
            self.timers["boot"] = time.monotonic() + BOOT_WAIT

    @property
    def leader_id(self) -> int:
        return self.view % self.n

    @property
    def leader(self) -> bool:
        return self.rid == self.leader_id and not self.syncing and not self.changing

    @property
    def normal(self) -> bool:
        return not self.syncing and not self.changing

    def count(self, what: str) -> None:
        self.stats[what] = self.stats.get(what, 0) + 1

    # -- sending ------------------------------------------------------------------
    def send_ctl(self, to: int, msg: dict[str, Any]) -> None:
        msg["r"], msg["v"] = self.rid, self.view
        self.ctl.sendto(
            self.mac.seal(json.dumps(msg).encode()), (self.replicas[to]["ip"], CTL_PORT)
        )

    def others(self) -> list[int]:
        return [r["id"] for r in self.replicas if r["id"] != self.rid]

    def answer(self, entry: Entry, index: int) -> None:
        ip = self.clients.get(entry.client)
        if ip is None:
            return
        bitmap = (self.view << VIEW_SHIFT) | (1 << self.rid)
        reply = HEADER_FIELDS.pack(CONSENSUS, RESULT, self.job_id, entry.client, 0, SLOTS, 0,
                          entry.req, index, self.session or 0, bitmap) + ZERO_SLOTS  # fmt: skip
        try:
            self.req.sendto(reply, (ip, self.port))
        except BlockingIOError:
            self.count("send_drops")  # a full send buffer is loss: the client asks again

    # -- the log ------------------------------------------------------------------
    def start_session(self, session: int) -> None:
        self.session, self.base, self.next_seq = session, len(self.log), 1
        self.pending.clear()
        self.decided.clear()
        self.noop_ok.clear()
        self.unconfirmed.clear()
        self.timers.pop("gap", None)
        self.count("sessions")

    def sequenced(self, session: int, seq: int, entry: Entry) -> None:
        """A request as the sequencer numbered it."""
        if (
            seq == self.next_seq
            and session == self.session
            and not self.pending
            and not self.syncing
            and not self.changing
            and seq not in self.decided
        ):  # the common case, next in order with nothing waiting: what advance() does
            if self.noop_ok:
                self.noop_ok.pop(seq, None)
            self.log.append(entry)
            self.next_seq = seq + 1
            if entry.client >= 0:
                self.answer(entry, len(self.log) - 1)
            return
        if not self.normal:
            self.early.append((session, seq, entry))
            return
        if self.session is None:
            self.start_session(session)
        elif newer(session, self.session):
            if self.leader:
                self.start_session(session)
            else:
                self.begin_sync()
                self.early.append((session, seq, entry))
                return
        elif session != self.session:
            return  # an older session: over
        if seq < self.next_seq or seq in self.decided:
            return
        self.pending[seq] = entry
        self.advance()

    def advance(self) -> None:
        while self.next_seq in self.pending:
            entry = self.pending.pop(self.next_seq)
            self.decided.discard(self.next_seq)
            self.noop_ok.pop(self.next_seq, None)
            self.log.append(entry)
            self.next_seq += 1
            if entry.client >= 0:
                self.answer(entry, len(self.log) - 1)
        if self.pending:
            self.timers.setdefault("gap", time.monotonic() + GAP_WAIT)
        else:
            self.timers.pop("gap", None)

    def decide(self, seq: int, entry: Entry) -> None:
        """Leader: ``seq`` of this session is ``entry`` (a request, or a no-op)."""
        self.pending[seq] = entry
        self.unconfirmed[seq] = set(self.others())
        msg = {"t": "DECIDE", "s": self.session, "q": seq, "e": entry.wire()}
        for r in self.others():
            self.send_ctl(r, dict(msg))
        self.count("gaps_filled" if entry.client >= 0 else "noops")
        self.advance()

    def entry_at(self, seq: int) -> Entry:
        return self.log[self.base + seq - 1]

    def replay_early(self) -> None:
        early, self.early = self.early, []
        for session, seq, entry in early:
            self.sequenced(session, seq, entry)

    # -- timers -------------------------------------------------------------------
    def on_timers(self, now: float) -> None:
        if self.timers.get("gap", now + 1) <= now and self.pending and self.normal:
            self.timers["gap"] = now + RETRY
            if self.leader:
                for r in self.others():
                    self.send_ctl(r, {"t": "GAP", "s": self.session, "q": self.next_seq})
            else:
                self.send_ctl(
                    self.leader_id, {"t": "FILL", "s": self.session, "q": [self.next_seq]}
                )
        if self.leader and self.unconfirmed and self.timers.get("redecide", 0) <= now:
            self.timers["redecide"] = now + RETRY
            for seq in sorted(self.unconfirmed)[:REDECIDE]:
                if seq < self.next_seq:
                    m = {"t": "DECIDE", "s": self.session, "q": seq, "e": self.entry_at(seq).wire()}
                    for r in self.unconfirmed[seq]:
                        self.send_ctl(r, dict(m))
        if self.leader and self.timers.get("hb", 0) <= now:
            self.timers["hb"] = now + HEARTBEAT
            for r in self.others():
                self.send_ctl(r, {"t": "HB", "s": self.session, "n": self.next_seq})
        if self.syncing and self.timers.get("sync", 0) <= now:
            self.timers["sync"] = now + RETRY
            msg = {"t": "SYNC_REQ", "s": self.latest_heard(), "from": len(self.sync_log)}
            for r in self.others():  # the leader answers; the view may be unknown here
                self.send_ctl(r, dict(msg))
        if self.syncing and not self.fresh and self.timers.get("sync_end", now + 1) <= now:
            # nobody answers the copy (the leader is gone or changing view itself): a replica
            # with a log of its own joins a view change with it instead of waiting for ever
            self.syncing = False
            self.timers.pop("sync", None)
            self.timers.pop("sync_end", None)
            self.start_view_change(self.view + 1)
        if self.timers.get("boot", now + 1) <= now:
            self.timers.pop("boot")
            if self.syncing and self.fresh:
                self.syncing = self.fresh = False  # nobody had state: a new group
                self.timers.pop("sync", None)
                self.timers.pop("sync_end", None)
                self.replay_early()
        if (
            self.normal
            and not self.leader
            and self.group_ip is not None  # the host sequencer's leader stays replica 0
            and now - self.heard > LEADER_TIMEOUT
        ):
            self.start_view_change(self.view + 1)
        if self.changing and self.timers.get("vc", 0) <= now:
            # a long session's VC is many chunks: resend it no faster than they can be sent
            self.timers["vc"] = now + RETRY * max(1.0, self.vc_chunks() / 10)
            if now > self.timers.get("vc_end", now + 1):
                self.start_view_change(self.view + 1)  # the new leader is gone too
            elif self.rid != self.leader_id:
                for part in chunked(self.vc_message()):
                    self.send_ctl(self.leader_id, part)

    def latest_heard(self) -> int | None:
        heard = [s for s, _, _ in self.early] + ([self.session] if self.session is not None else [])
        best = None
        for s in heard:
            if best is None or newer(s, best):
                best = s
        return best

    # -- view change ----------------------------------------------------------------
    def start_view_change(self, view: int) -> None:
        """The leader is silent (or another replica said so): move to ``view``, whose
        leader merges the logs of ``f + 1`` replicas."""
        self.view, self.changing = view, True
        self.vc_logs = {}
        self.parts.clear()
        now = time.monotonic()
        self.timers["vc"] = now
        # time to move every chunk of the logs (VC in, START out) before giving up on the view
        self.timers["vc_end"] = now + VIEW_CHANGE_TIMEOUT + VC_CHUNK_TIME * self.vc_chunks()
        self.timers.pop("gap", None)
        self.unconfirmed.clear()  # the new view's START carries the whole merged log
        self.count("view_changes")
        if self.rid == self.leader_id:
            self.vc_logs[self.rid] = self.vc_message()

    def vc_chunks(self) -> int:
        return (len(self.log) - self.base) // CHUNK + 1

    def vc_message(self) -> dict[str, Any]:
        return {"t": "VC", "s": self.session, "base": self.base,
                "e": [e.wire() for e in self.log[self.base :]]}  # fmt: skip

    def assembled(self, msg: dict[str, Any]) -> dict[str, Any] | None:
        """A VC or START message whole again once all its chunks came (``chunked``)."""
        if "len" not in msg:
            return msg
        got = self.parts.setdefault((str(msg["t"]), int(msg["r"])), {})
        first = next(iter(got.values()), None)
        if first is not None and (first["s"], first["base"], first["len"], first["v"]) != (
            msg["s"],
            msg["base"],
            msg["len"],
            msg["v"],
        ):
            got.clear()  # chunks of another message: start again
        got[int(msg["from"])] = msg
        if sum(len(m["e"]) for m in got.values()) < int(msg["len"]):
            return None
        whole = dict(msg)
        whole["e"] = [e for _, m in sorted(got.items()) for e in m["e"]]
        del self.parts[(str(msg["t"]), int(msg["r"]))]
        return whole

    def on_vc(self, msg: dict[str, Any]) -> None:
        v = int(msg["v"])
        if self.syncing or v < self.view or (v == self.view and not self.changing):
            return
        if v > self.view:
            self.start_view_change(v)
        if self.rid != self.leader_id:
            return
        whole = self.assembled(msg)
        if whole is None:
            return
        self.vc_logs[int(msg["r"])] = whole
        if len(self.vc_logs) < self.f + 1:
            return
        latest = None
        for s in (m["s"] for m in self.vc_logs.values() if m["s"] is not None):
            if latest is None or newer(s, latest):
                latest = s
        if latest != self.session:
            # This replica is in an older session than another of the quorum: it lacks the
            # log before that session (a VC carries only its session's entries), so it must
            # not lead. The next view's leader will; this replica then copies its log.
            self.start_view_change(self.view + 1)
            return
        # A committed entry was answered by f + 1 replicas, so one of any f + 1 replicas with
        # state holds it, in the latest session (sessions only move forward, and a replica
        # answers only in its session). Where the latest session's logs differ at an index,
        # only a no-op can stand against a request.
        logs = [m for m in self.vc_logs.values() if m["s"] == latest]
        width = max(len(m["e"]) for m in logs)
        merged = []
        for i in range(width):
            got = [Entry.of(m["e"][i]) for m in logs if i < len(m["e"])]
            merged.append(next((e for e in got if e.client >= 0), NOOP))
        base = self.base  # every replica of a session has the same log before it
        self.log = EntryLog(self.log[:base] + merged)
        self.session, self.base, self.next_seq = latest, base, len(merged) + 1
        self.pending.clear()
        self.decided.clear()
        self.noop_ok.clear()
        self.changing = False
        self.fresh = False
        start = {"t": "START", "s": latest, "base": base, "e": [e.wire() for e in merged]}
        for r in self.others():
            for part in chunked(start):
                self.send_ctl(r, part)
        self.replay_early()

    def on_start(self, msg: dict[str, Any]) -> None:
        v = int(msg["v"])
        if self.syncing or v < self.view:
            return
        whole = self.assembled(msg)
        if whole is None:
            return
        msg = whole
        base = int(msg["base"])
        if base > len(self.log) or msg["s"] != self.session:
            # the new leader's session is not this replica's: the log before the session's
            # entries may differ from the leader's (an older session's undecided tail)
            self.begin_sync()
            return
        self.view, self.changing = v, False
        self.log = EntryLog(self.log[:base] + [Entry.of(e) for e in msg["e"]])
        self.session, self.base = msg["s"], base
        self.next_seq = len(self.log) - base + 1
        self.pending.clear()
        self.decided.clear()
        self.heard = time.monotonic()
        self.replay_early()

    # -- control messages ---------------------------------------------------------
    def on_ctl(self, msg: dict[str, Any], addr: tuple[str, int]) -> None:
        t = msg.get("t")
        if t == "READ":
            self.on_read(msg, addr)
            return
        if "v" not in msg or "r" not in msg:
            return
        r = msg["r"]
        if not isinstance(r, int) or not 0 <= r < self.n or self.replicas[r]["ip"] != addr[0]:
            self.count("dropped_sender")  # a replica's message from elsewhere
            return
        if t == "VC":
            self.on_vc(msg)
        elif t == "START":
            self.on_start(msg)
        elif t == "SYNC_REQ":
            self.on_sync_req(msg)
        elif t == "SYNC":
            self.on_sync(msg)
        elif self.leader:
            self.on_leader_ctl(t, msg)
        else:
            self.on_follower_ctl(t, msg)

    def on_read(self, msg: dict[str, Any], addr: tuple[str, int]) -> None:
        start = max(0, int(msg.get("from", 0)))
        chunk = [e.wire() for e in self.log[start : start + CHUNK]]
        reply = {"t": "ENTRIES", "from": start, "len": len(self.log), "e": chunk,
                 "r": self.rid, "leader": self.leader}  # fmt: skip
        self.ctl.sendto(self.mac.seal(json.dumps(reply).encode()), addr)

    def on_sync_req(self, msg: dict[str, Any]) -> None:
        r, s = int(msg["r"]), msg.get("s")
        if not self.leader:
            if not self.fresh:
                self.send_ctl(r, {"t": "HINT"})  # the requester must not lead from nothing
            if not self.fresh and self.normal and r == self.leader_id and self.group_ip:
                self.start_view_change(self.view + 1)  # our leader restarted empty
            return
        if s is not None and (self.session is None or newer(s, self.session)):
            self.start_session(s)
        start = int(msg["from"])
        reply = {"t": "SYNC", "s": self.session, "base": self.base, "n": self.next_seq,
                 "len": len(self.log), "from": start,
                 "e": [e.wire() for e in self.log[start : start + CHUNK]]}  # fmt: skip
        self.send_ctl(r, reply)

    def on_leader_ctl(self, t: Any, msg: dict[str, Any]) -> None:
        s = msg.get("s")
        if int(msg["v"]) > self.view:
            self.begin_sync()  # a newer view exists: this replica was deposed
            return
        if s != self.session:
            return
        if t == "FILL":
            for seq in msg["q"][:CHUNK]:
                if 1 <= seq < self.next_seq:
                    m = {"t": "DECIDE", "s": s, "q": seq, "e": self.entry_at(seq).wire()}
                    self.send_ctl(int(msg["r"]), m)
        elif t == "DECIDED":
            waiting = self.unconfirmed.get(int(msg["q"]))
            if waiting is not None:
                waiting.discard(int(msg["r"]))
                if not waiting:
                    del self.unconfirmed[int(msg["q"])]
        elif t == "HAVE" and msg["q"] == self.next_seq and self.pending:
            self.decide(msg["q"], Entry.of(msg["e"]))
        elif t == "NOOP_OK" and msg["q"] == self.next_seq and self.pending:
            oks = self.noop_ok.setdefault(msg["q"], set())
            oks.add(int(msg["r"]))
            if len(oks) >= self.f:
                self.decide(msg["q"], NOOP)

    def on_follower_ctl(self, t: Any, msg: dict[str, Any]) -> None:
        if t == "HINT":
            self.timers.pop("boot", None)  # another replica has state: sync, never boot
            return
        v, s = int(msg["v"]), msg.get("s")
        if self.syncing or self.changing and v <= self.view:
            return
        if v > self.view:
            self.view, self.changing = v, False
            self.begin_sync()
            return
        if int(msg["r"]) != self.leader_id:
            return
        self.heard = time.monotonic()
        if s is not None and self.session is not None and newer(s, self.session):
            self.begin_sync()
            return
        if s != self.session and not (t == "HB" and self.session is None):
            return
        if t == "DECIDE":
            seq, entry = int(msg["q"]), Entry.of(msg["e"])
            if seq < self.next_seq:
                self.log[self.base + seq - 1] = entry
            else:
                self.pending[seq] = entry
                self.decided.add(seq)
                self.advance()
            self.send_ctl(self.leader_id, {"t": "DECIDED", "s": s, "q": seq})
        elif t == "GAP":
            seq = int(msg["q"])
            have = self.entry_at(seq) if seq < self.next_seq else self.pending.get(seq)
            if have is not None:
                self.send_ctl(self.leader_id, {"t": "HAVE", "s": s, "q": seq, "e": have.wire()})
            else:
                self.pending[seq] = NOOP  # promised: this replica never logs the request there
                self.decided.add(seq)
                self.send_ctl(self.leader_id, {"t": "NOOP_OK", "s": s, "q": seq})
                self.advance()
        elif t == "HB":
            if self.session is None and s is not None:
                self.start_session(int(s))  # a fresh leader's first session: base 0 at both
            missing = [q for q in range(self.next_seq, int(msg["n"])) if q not in self.pending]
            # Under load a follower runs behind the leader by what waits in its socket: that
            # is no lost tail, and asking for it cost the leader a DECIDE per entry and took
            # this replica off the C path until they came. A gap inside what it reads is
            # still found by the gap timer; a lost tail when the socket is empty.
            if missing and not queued(self.req):
                self.send_ctl(self.leader_id, {"t": "FILL", "s": s, "q": missing[:CHUNK]})

    def begin_sync(self) -> None:
        self.syncing = True
        self.sync_log = []
        self.unconfirmed.clear()
        self.timers["sync"] = 0.0
        self.timers["sync_end"] = time.monotonic() + LEADER_TIMEOUT
        self.timers.pop("gap", None)
        self.count("syncs")

    def on_sync(self, msg: dict[str, Any]) -> None:
        if not self.syncing or int(msg["from"]) != len(self.sync_log):
            return
        self.view = max(self.view, int(msg["v"]))
        self.sync_log.extend(Entry.of(e) for e in msg["e"])
        if len(self.sync_log) < int(msg["len"]):
            self.timers["sync"] = 0.0  # ask for the next chunk now
            self.timers["sync_end"] = time.monotonic() + LEADER_TIMEOUT
            return
        self.log, self.sync_log = EntryLog(self.sync_log), []
        self.session, self.base, self.next_seq = msg["s"], int(msg["base"]), int(msg["n"])
        self.pending.clear()
        self.decided.clear()
        self.syncing = self.fresh = self.changing = False
        self.heard = time.monotonic()
        self.timers.pop("sync", None)
        self.timers.pop("sync_end", None)
        self.timers.pop("boot", None)
        self.replay_early()

    # -- requests -----------------------------------------------------------------
    def on_request(self, data: bytes, addr: tuple[str, int]) -> None:
        if len(data) < REQUEST_LEN:
            return
        op, flags, job, worker, count, psn, seq, session = REQUEST_FIELDS.unpack_from(data)
        if op != CONSENSUS or job != self.job_id or flags & RESULT or count != SLOTS:
            return
        # The switch admits a client's request from its own port only; here it must also
        # come from the client's address (or, numbered by a host sequencer, the leader's).
        if self.group_ip is None and seq != 0:
            sender = self.replicas[self.leader_id]["ip"]
        else:
            sender = self.clients.get(worker)
        if addr != (sender, self.port):
            self.count("dropped_sender")
            return
        size = min(WORD.unpack_from(data, HEADER_LEN)[0], MAX_DATA)
        entry = Entry(worker, psn, data[HEADER_LEN + 4 : HEADER_LEN + 4 + size])
        if self.group_ip is None and seq == 0:
            if not self.leader:
                return
            # --sequencer host: number the client's request and send it to the followers
            self.host_seq += 1
            frame = bytearray(data[:REQUEST_LEN])
            HEADER_FIELDS.pack_into(frame, 0, CONSENSUS, FALLBACK, job, worker, 0, SLOTS, 0, psn,
                           self.host_seq, HOST_SESSION, 0)  # fmt: skip
            for r in self.others():
                try:
                    self.req.sendto(frame, (self.replicas[r]["ip"], self.port))
                except BlockingIOError:
                    self.count("send_drops")  # a follower fills the gap from the leader
            self.sequenced(HOST_SESSION, self.host_seq, entry)
            return
        if seq == 0:
            return
        if self.group_ip is None:
            self.heard = time.monotonic()  # the host sequencer's frames: the leader is alive
        self.stats["requests"] = self.stats.get("requests", 0) + 1
        self.sequenced(session, seq, entry)

    def run(self, stop: list[bool]) -> None:
        """Serve until ``stop[0]``: timers, then what the sockets hold. Requests take the C
        path (``native_replica.py``: the same checks, the in-order case in C, the rest here)
        unless the back end is ``python``."""
        native = NativeRequests.for_replica(self)
        try:
            self._serve(stop, native)
        finally:
            if native is not None:
                native.close()

    def _serve(self, stop: list[bool], native: NativeRequests | None) -> None:
        while not stop[0]:
            now = time.monotonic()
            self.on_timers(now)
            wake = min([*self.timers.values(), now + 0.05])
            if native is not None:  # requests in C until a timer is due or a control datagram
                native.serve(self, wake)
                ready = [self.ctl]
            else:
                ready, _, _ = select.select([self.req, self.ctl], [], [], max(0.0, wake - now))
            for sock in ready:
                for _ in range(256):
                    try:
                        data, addr = sock.recvfrom(65535)
                    except BlockingIOError:
                        break
                    if sock is self.req:
                        self.on_request(data, addr)
                    else:
                        self.on_ctl_datagram(data, addr)

    def on_ctl_datagram(self, data: bytes, addr: tuple[str, int]) -> None:
        opened = self.mac.open(data)
        if opened is None:
            self.count("dropped_tag")  # not sealed with the job's key
            return
        try:
            msg = json.loads(opened)
        except ValueError:
            self.count("dropped_malformed")
            return
        if not isinstance(msg, dict):
            self.count("dropped_malformed")
            return
        try:
            self.on_ctl(msg, addr)
        except (KeyError, TypeError, ValueError, IndexError, AttributeError):
            self.count("dropped_malformed")  # sealed by a host of the job, but not a message

    def summary(self) -> dict[str, Any]:
        return {"rid": self.rid, "session": self.session, "view": self.view,
                "syncing": self.syncing, "log": [e.wire() for e in self.log],
                "stats": self.stats}  # fmt: skip
