"""Consistent switch-over of a job's switch configuration at an epoch boundary.

Example:
    >>> old, new = SlotConfig(Region(0, 8), quorum=2), SlotConfig(Region(0, 4), quorum=2)
    >>> s = Switchover(workers=[0, 1], config=old)
    >>> s.ask(0, 0).config == old and s.ask(1, 0).config == old    # both start epoch 0
    True
    >>> s.retarget(new)                        # the scheduler shrinks the job meanwhile
    >>> a = s.ask(0, 1)                        # worker 0 starts epoch 1: the new layout...
    >>> a.config == new, a.writes              # ...written into slot 1 first
    (True, [(1, SlotConfig(region=Region(offset=0, size=4), quorum=2))])
    >>> s.ask(1, 1).writes                     # all in epoch 1: slot 0 follows
    [(0, SlotConfig(region=Region(offset=0, size=4), quorum=2))]
    >>> s.regions()                            # [4, 8) is no longer used: release it
    [Region(offset=0, size=4)]

The mechanism every system shares when a job's switch configuration changes while it runs
(its memory region here; Serene's synchronisation mode later): the switch holds two
configurations per job, *epoch slots*, and applies to a packet the one selected by the
parity of the packet's ``epoch`` (``p4src/job_region.p4``, ``epoch_slots``). Workers ask the
controller for the configuration of every epoch before they send its first packet
(``JobManager.epoch``); a new configuration is written into the idle slot before anyone is
told about the epoch that uses it, so all of that epoch's packets, and no other epoch's,
are handled under it. The rules (docs/protocol.md, "Switch-over at an epoch boundary"):

- The configuration of epoch ``e`` is fixed when the first worker asks for ``e``: the
  latest target. Everyone asking for ``e`` later gets the same one.
- A worker asks for ``e`` only once it holds every result of ``e - 1``; so when anyone asks
  for ``e``, every worker has sent all of ``e - 1`` and asked for it, and nobody needs
  ``e - 2`` any more: slot ``e % 2`` is free to take ``e``'s configuration. A worker asking
  for ``e`` while another has not asked for ``e - 1`` breaks the rule and is refused.
- When every worker has asked for ``e`` (nobody needs ``e - 1``), the other slot is set to
  ``e``'s configuration too: from then on delayed packets of ``e - 1`` are checked against
  the new layout, and memory that only the old one used can go to other jobs.
- When the region of epoch ``e`` differs from the one the job last ran with, a worker
  starts ``e`` only once every worker has asked for ``e`` (``Answer.wait``): then nobody
  needs a result still held in the old region, so the new one may overlap it (grow or
  shrink in place, slide) and reuse its copies at once. A layout change costs one such
  barrier; an unchanged layout none.
- A configuration without memory (``region`` None) makes the workers wait. Nobody sends
  packets of an epoch fixed that way, so when memory comes, the epoch is fixed again.

This module is pure logic: it says which slots to write; the caller writes them over
P4Runtime, then releases memory that ``regions`` no longer names.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from controller.jobs.memory_manager import Region


class SwitchoverError(ValueError):
    """A worker broke the epoch protocol (unknown worker, epoch out of order)."""


@dataclass(frozen=True)
class SlotConfig:
    """One epoch slot: the job's region (None: no memory, workers wait) and its quorum."""

    region: Region | None
    quorum: int

    @property
    def runs(self) -> bool:
        return self.region is not None and self.region.size > 0


@dataclass(frozen=True)
class Answer:
    """The configuration of ``epoch``; ``wait``: do not send yet, ask again (a layout change
    waits for every worker, a configuration without memory for memory)."""

    epoch: int
    config: SlotConfig
    writes: list[tuple[int, SlotConfig]] = field(default_factory=list)  # (slot, config)
    wait: bool = False


class Switchover:
    """Which configuration each live epoch of one job uses, and what its two slots hold."""

    def __init__(self, workers: Iterable[int], config: SlotConfig, resumed: bool = False) -> None:
        """Both slots hold ``config``. ``resumed``: the job ran before (a controller
        restart); the first epoch anyone asks for then tells where the workers are."""
        self.workers = sorted(set(workers))
        if not self.workers:
            raise ValueError("a job has at least one worker")
        self.slots = [config, config]
        self.target = config
        self.fixed: dict[int, SlotConfig] = {}  # live epochs -> their configuration
        self.asked: dict[int, int] = {w: -1 for w in self.workers}
        self._last_run: SlotConfig | None = config if resumed and config.runs else None
        self._changes: set[int] = set()  # live epochs whose region differs from the last one
        self._resumed = resumed

    @property
    def lo(self) -> int:
        """Every worker has asked for this epoch (so all hold every result before it)."""
        return min(self.asked.values())

    @property
    def hi(self) -> int:
        return max(self.asked.values())

    def retarget(self, config: SlotConfig) -> None:
        """Use ``config`` from the next epoch nobody has been told about."""
        self.target = config

    def regions(self) -> list[Region]:
        """Memory the switch may still use for this job: what its slots name."""
        return sorted({c.region for c in self.slots if c.region is not None and c.region.size})

    def ask(self, worker: int, epoch: int) -> Answer:
        """Worker ``worker`` is about to start ``epoch``: its configuration, and the slot
        writes that must reach the switch before the answer reaches the worker."""
        if worker not in self.asked:
            raise SwitchoverError(f"no worker {worker} in this job (workers {self.workers})")
        if epoch < 0:
            raise SwitchoverError(f"epoch must be >= 0, got {epoch}")
        if self._resumed:
            # Whoever asks first after a restart has finished epoch - 1, hence all have.
            self._resumed = False
            for w in self.asked:
                self.asked[w] = max(self.asked[w], epoch - 1)
        last = self.asked[worker]
        if epoch < last:
            raise SwitchoverError(f"worker {worker} already started epoch {last}, not {epoch}")
        if epoch > self.lo + 1 and epoch != last:
            raise SwitchoverError(
                f"worker {worker} asks for epoch {epoch} while epoch {self.lo} is unfinished"
                f" (every worker must finish epoch e - 1 before anyone starts e)"
            )
        writes: list[tuple[int, SlotConfig]] = []
        self.asked[worker] = epoch
        config = self.fixed.get(epoch)
        if config is None or (not config.runs and self.target.runs):
            config = self.fixed[epoch] = self.target
            if config.runs:
                ran = self._last_run
                if ran is not None and ran.region != config.region:
                    self._changes.add(epoch)
                self._last_run = config
            self._write(epoch % 2, config, writes)
        if self.lo == epoch and self.hi == epoch:
            # Nobody needs epoch - 1 any more: the other slot follows.
            self._write((epoch + 1) % 2, config, writes)
        for e in [e for e in self.fixed if e < self.lo]:
            del self.fixed[e]
        self._changes = {e for e in self._changes if e >= self.lo}
        wait = not config.runs or (epoch in self._changes and self.lo < epoch)
        return Answer(epoch, config, writes, wait)

    def _write(self, slot: int, config: SlotConfig, writes: list[tuple[int, SlotConfig]]) -> None:
        if self.slots[slot] != config:
            self.slots[slot] = config
            writes.append((slot, config))
