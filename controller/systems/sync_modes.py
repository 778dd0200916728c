"""Programs ``p4src/sync_modes.p4``: a job's synchronisation mode, its clocks, the hot swap.

Example::

    mode = Mode.parse("partial 3", n_workers=4)
    await install(sw, job, mode)                  # before the job's ``jobs`` entry
    boundary = await swap(sw, job, Mode.parse("bounded 2", 4))
    clocks = await read_clocks(sw, job)           # per-worker epochs, the slowest one

``sync_modes``: ``job_id`` -> ``set_modes(sync_slot, workers, boundary_epoch, fence_on,
mode/quorum/lead before, mode/quorum/lead after)`` (lead = bound + 1). Packets of epoch
< boundary use the mode before, the others the mode after (docs/protocol.md,
"Synchronisation modes").

Hot swap (``swap``), so that no round (epoch) is aggregated under two modes:

1. the previous swap must be over (``retired``): every round before its boundary is
   finished and no packet of one can be aggregated any more, which holds once the slowest
   worker is more than ``bound`` epochs past it; the entry holds two modes, so the fence
   (step 2) may only forget the older one then. The caller holds the job's lock
   (``JobManager.locked``), so two swaps never interleave;
2. read the clocks, pick ``E`` = the fastest worker's epoch + 1, write the *fence*: same mode
   on both sides, epochs >= E wait (the switch answers FLAG_WAIT);
3. read the clocks again: if a worker was admitted at E or later meanwhile (it raced the
   fence), go back to 2 with a later E. Otherwise no packet of an epoch >= E has been
   aggregated and none will be until the fence lifts, so
4. write the new mode after E with the fence lifted. Held workers resend and go on.

Into ``async`` (from another mode), with the fence up: the running aggregates of the job's
region are zeroed and every worker's ``async_last`` is unset, so each worker's first async
packet is its first of epoch E. Out of ``async``: async epochs move only the workers'
clocks, so with the fence up the slowest epoch is set to E - 1 and its ring cleared: the
new mode's first round (E) is counted from scratch.

The switch is the record: ``read_state`` decodes the job's entry, so a restarted controller
knows the mode, the boundary and whether a fence is up.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from finsy import P4CounterEntry, P4TableEntry, P4TableMatch

from controller.jobs.job import Job, JobError
from controller.p4rt.p4runtime_client import SwitchConnection, table_entry
from wire.header import ASYNC_UNSET, MAX_WORKERS, SLOTS, SYNC_JOBS, SYNC_RING, SyncMode
from wire.serial import distance, oldest, wrap

SYNC_MODES = "IncIngress.sync_mode_table.sync_modes"
SET_MODES = "IncIngress.sync_mode_table.set_modes"
CLOCK = "sync_clock"  # top-level: read by SyncModes, written by SyncClocks
SLOWEST = "sync_min"
REACHED = "IncIngress.sync_clocks.sync_reached"
WAITS = "IncIngress.sync_modes.sync_waits"
LATE = "IncIngress.sync_late.sync_late"
ASYNC_LAST = "IncIngress.sync_modes.async_last"
ASYNC_SUMS = tuple(f"IncIngress.sync_modes.async_sum_{i:02d}" for i in range(SLOTS))
MAX_BOUND = SYNC_RING - 2  # the clocks track SYNC_RING epochs: lead = bound + 1 < SYNC_RING
SWAP_TRIES = 8


class SwapRefused(JobError):
    """A mode change that cannot be applied now (the previous one is still in progress)."""


@dataclass(frozen=True)
class Mode:
    """One synchronisation mode: ``kind``, ``quorum`` (partial: k) and ``bound`` S (how many
    epochs a worker may run ahead of the slowest one beyond lockstep: a worker may start
    epoch e while the slowest has started e - S - 1; sync is S = 0).

    >>> Mode.parse("partial 3", n_workers=4)
    Mode(kind=<SyncMode.PARTIAL: 1>, quorum=3, bound=1)
    >>> str(Mode.parse("bounded 2", n_workers=4))
    'bounded 2'
    >>> Mode.parse("partial 5", n_workers=4)
    Traceback (most recent call last):
    ...
    controller.jobs.job.JobError: partial K: K must be in 1..4 (the job's workers), got 5
    """

    kind: SyncMode
    quorum: int = 0
    bound: int = 1

    @classmethod
    def parse(cls, text: str, n_workers: int) -> Mode:
        """``sync``, ``partial K [bound S]``, ``bounded S``, ``async``."""
        words = text.split()
        usage = "a mode is 'sync', 'partial K [bound S]', 'bounded S' or 'async'"
        if not words:
            raise JobError(usage)
        name, args = words[0].lower(), words[1:]
        try:
            nums = [int(a) for a in args if a != "bound"]
        except ValueError:
            raise JobError(f"{usage}, got {text!r}") from None
        if name == "sync" and not nums:
            return cls(SyncMode.SYNC, n_workers, 0)
        if name == "async" and not nums:
            return cls(SyncMode.ASYNC, n_workers, 1)  # the lead: how old a repeat may be
        if name == "bounded" and len(nums) == 1:
            return cls(SyncMode.BOUNDED, n_workers, _bound(nums[0]))
        if name == "partial" and len(nums) in (1, 2) and (len(nums) == 1 or args[1] == "bound"):
            k = nums[0]
            if not 1 <= k <= n_workers:
                raise JobError(
                    f"partial K: K must be in 1..{n_workers} (the job's workers), got {k}"
                )
            return cls(SyncMode.PARTIAL, k, _bound(nums[1]) if len(nums) == 2 else 1)
        raise JobError(f"{usage}, got {text!r}")

    def __str__(self) -> str:
        if self.kind == SyncMode.PARTIAL:
            return f"partial {self.quorum}" + (f" bound {self.bound}" if self.bound != 1 else "")
        if self.kind == SyncMode.BOUNDED:
            return f"bounded {self.bound}"
        return self.kind.name.lower()


def region_needed(mode: Mode, round_packets: int) -> int:
    """Aggregators a region needs under ``mode`` for rounds of ``round_packets`` packets
    (0: the window rule alone). Partial (rule P2): a worker starts epoch e only once the
    slowest has started e - L, so S + 2 rounds (L + 1, L = S + 1) are live at once and each
    keeps its copies; async: a chunk's aggregate per packet of an epoch.

    >>> region_needed(Mode.parse("partial 2", 3), 4), region_needed(Mode.parse("async", 3), 4)
    (12, 4)
    """
    if mode.kind == SyncMode.PARTIAL:
        return (mode.bound + 2) * round_packets
    if mode.kind == SyncMode.ASYNC:
        return round_packets
    return 0


def check_region(mode: Mode, region_size: int, round_packets: int) -> None:
    """Refuse, in one line, a ``mode`` whose rounds ``region_size`` aggregators cannot hold."""
    need = region_needed(mode, round_packets)
    if region_size >= need:
        return
    why = (
        f"rule P2: (bound {mode.bound} + 2) rounds of {round_packets} packets"
        if mode.kind == SyncMode.PARTIAL
        else f"one aggregator per packet of a round of {round_packets}"
    )
    raise JobError(
        f"{mode} needs a region of {need} aggregators ({why}), the job has {region_size}:"
        f" give region_size >= {need}"
    )


def _bound(s: int) -> int:
    if not 0 <= s <= MAX_BOUND:
        raise JobError(f"bound must be in 0..{MAX_BOUND} (the switch tracks {SYNC_RING} epochs)")
    return s


@dataclass(frozen=True)
class ModeState:
    """The job's ``sync_modes`` entry: modes before and after ``boundary``, and the fence."""

    slot: int
    workers: int
    boundary: int
    fence: bool
    before: Mode
    after: Mode

    def mode_of(self, epoch: int) -> Mode:
        return self.after if distance(epoch, self.boundary) >= 0 else self.before


@dataclass(frozen=True)
class Clocks:
    """Per worker id, the newest epoch the switch admitted it with; and the slowest epoch.
    Before a worker's first packet its clock is ``first_epoch - 1`` (mod 2**32)."""

    workers: tuple[int, ...]
    slowest: int

    @classmethod
    def of(cls, workers: tuple[int, ...]) -> Clocks:
        """The slowest epoch is the workers' oldest clock (serial order): the switch's
        ``sync_min`` is the same outside async, where it does not move."""
        return cls(workers, oldest(workers))

    def lead(self, epoch: int) -> int:
        """How far ``epoch`` is past the slowest worker (negative: behind it)."""
        return distance(epoch, self.slowest)

    @property
    def fastest(self) -> int:
        return max(self.workers, key=self.lead)


def sync_slot(job_id: int) -> int:
    """The job's index in the clock registers."""
    return job_id % SYNC_JOBS


def mode_entry(job_id: int, state: ModeState) -> P4TableEntry:
    b, a = state.before, state.after
    return table_entry(
        SYNC_MODES,
        {"hdr.inc.job_id": job_id},
        SET_MODES,
        sync_slot=state.slot,
        workers=state.workers,
        boundary_epoch=wrap(state.boundary),
        fence_on=int(state.fence),
        mode_before=int(b.kind),
        quorum_before=b.quorum,
        lead_before=b.bound + 1,
        mode_after=int(a.kind),
        quorum_after=a.quorum,
        lead_after=a.bound + 1,
    )


def mode_key(job_id: int) -> P4TableEntry:
    return P4TableEntry(SYNC_MODES, match=P4TableMatch({"hdr.inc.job_id": job_id}))


def _decode(entry: P4TableEntry) -> ModeState:
    assert entry.action is not None
    p = {k: int(v) for k, v in dict(entry.action.args).items()}  # type: ignore[union-attr]
    before = Mode(SyncMode(p["mode_before"]), p["quorum_before"], p["lead_before"] - 1)
    after = Mode(SyncMode(p["mode_after"]), p["quorum_after"], p["lead_after"] - 1)
    return ModeState(
        p["sync_slot"], p["workers"], p["boundary_epoch"], bool(p["fence_on"]), before, after
    )


async def read_state(sw: SwitchConnection, job_id: int) -> ModeState | None:
    got = await sw.read(mode_key(job_id))
    return _decode(got[0]) if got else None


async def install(
    sw: SwitchConnection, job: Job, mode: Mode, first_epoch: int = 0, idempotent: bool = False
) -> None:
    """Reset the job's clocks to ``first_epoch - 1`` and write its entry (before the job's
    ``jobs`` entry, so that its first packet already meets the mode)."""
    slot = sync_slot(job.job_id)
    for other in await sw.read(P4TableEntry(SYNC_MODES)):
        match = other.match or {}
        other_id = int(match["job_id"]) if "job_id" in match else -1  # type: ignore[arg-type]
        if other_id != job.job_id and _decode(other).slot == slot:
            raise JobError(
                f"job {job.job_id} shares synchronisation slot {slot} with job {other_id} "
                f"(slot = job id % {SYNC_JOBS}); admit it under another job id"
            )
    start = wrap(first_epoch - 1)
    await sw.fill_register(CLOCK, range(slot * MAX_WORKERS, (slot + 1) * MAX_WORKERS), start)
    await sw.write_register(SLOWEST, slot, start)
    await sw.fill_register(REACHED, range(slot * SYNC_RING, (slot + 1) * SYNC_RING), 0)
    if mode.kind == SyncMode.ASYNC:
        await reset_async(sw, job)
    state = ModeState(slot, job.n_workers, first_epoch, False, mode, mode)
    write = sw.upsert if idempotent else sw.insert
    await write([mode_entry(job.job_id, state)])


async def reset_async(sw: SwitchConnection, job: Job) -> None:
    """A new async period: running aggregates of the job's region at 0, no worker's
    contribution seen yet."""
    slot = sync_slot(job.job_id)
    await sw.fill_register(ASYNC_LAST, range(slot * MAX_WORKERS, (slot + 1) * MAX_WORKERS),
                           ASYNC_UNSET)  # fmt: skip
    cells = range(job.region.offset, job.region.offset + job.region.size)
    for name in ASYNC_SUMS:
        await sw.fill_register(name, cells, 0)


async def restart_rounds(sw: SwitchConnection, job: Job, boundary: int) -> None:
    """Leaving async at ``boundary``: rounds are counted again from that epoch."""
    slot = sync_slot(job.job_id)
    await sw.write_register(SLOWEST, slot, wrap(boundary - 1))
    await sw.fill_register(REACHED, range(slot * SYNC_RING, (slot + 1) * SYNC_RING), 0)


async def uninstall(sw: SwitchConnection, job: Job) -> None:
    await sw.delete([mode_key(job.job_id)], strict=False)


async def read_clocks(sw: SwitchConnection, job: Job) -> Clocks:
    slot = sync_slot(job.job_id)
    base = slot * MAX_WORKERS
    return Clocks.of(
        tuple([await sw.read_register(CLOCK, base + w.worker_id) for w in job.workers])
    )


async def read_figures(sw: SwitchConnection, job: Job) -> tuple[int, int]:
    """(packets told to wait, late contributions) of the job so far."""
    slot = sync_slot(job.job_id)
    out = []
    for name in (WAITS, LATE):
        got = await sw.read(P4CounterEntry(name, index=slot))
        out.append(int(got[0].packet_count) if got and got[0].data is not None else 0)
    return out[0], out[1]


def retired(state: ModeState, clocks: Clocks) -> bool:
    """Whether the entry may be rewritten, which forgets its mode before the boundary:
    trivially when both sides have one mode; else once every worker is past ``boundary +
    bound`` for the larger bound S of the two modes. Then every round before the boundary
    is finished (a worker starts epoch e only with the results of e - S - 1), and a
    delayed packet of such a round is older than its sender's clock minus the lead S + 1
    of the mode after the boundary, the mode the rewritten entry judges it by: it is
    dropped (``OLD_EPOCH``), never aggregated under a mode its round did not have."""
    if state.before == state.after:
        return True
    past = distance(clocks.slowest, state.boundary)
    if state.after.kind == SyncMode.ASYNC:
        # Async judges a packet by its psn: a worker past the boundary has added newer
        # ones, so an older packet is answered and adds nothing. Only the rounds before
        # the boundary must be finished.
        return past >= 0 and past >= state.before.bound
    return past >= 0 and past > max(state.before.bound, state.after.bound)


async def swap(sw: SwitchConnection, job: Job, mode: Mode) -> int:
    """Change the job's mode at an epoch boundary no worker has reached (see the module
    docstring); returns that boundary epoch. ``SwapRefused`` while the previous change
    is still in progress."""
    state = await read_state(sw, job.job_id)
    if state is None:
        raise JobError(f"job {job.job_id} has no synchronisation mode on the switch")
    clocks = await read_clocks(sw, job)
    if not retired(state, clocks):  # a fence left up has one mode: always retired
        raise SwapRefused(
            f"job {job.job_id}: the change to {state.after} at epoch {state.boundary} is still"
            f" in progress (slowest worker at epoch {clocks.slowest}); try again shortly"
        )
    current = state.after
    for _ in range(SWAP_TRIES):
        boundary = wrap(clocks.fastest + 1)
        fence = replace(state, boundary=boundary, fence=True, before=current, after=current)
        await sw.modify([mode_entry(job.job_id, fence)])
        clocks = await read_clocks(sw, job)
        if all(distance(c, boundary) < 0 for c in clocks.workers):
            entering = mode.kind == SyncMode.ASYNC and current.kind != SyncMode.ASYNC
            if entering:
                await reset_async(sw, job)
            elif current.kind == SyncMode.ASYNC and mode.kind != SyncMode.ASYNC:
                await restart_rounds(sw, job, boundary)
            final = replace(fence, fence=False, after=mode)
            await sw.modify([mode_entry(job.job_id, final)])
            return boundary
    # Workers kept racing the fence: leave the mode as it was, fence lifted.
    await sw.modify([mode_entry(job.job_id, replace(fence, fence=False))])
    raise SwapRefused(f"job {job.job_id}: workers kept passing the fence; try again")
