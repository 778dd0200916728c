"""Synchronisation policies: a decision in a few words, applied by the controller as mode swaps.

Example:
    >>> p = Policy.parse("partial 3 when lag >= 2 else sync")
    >>> p
    Policy('partial 3 when lag >= 2 else sync')
    >>> w = Watch(p)
    >>> w.decide((5, 5, 5, 3)), w.decide((6, 6, 6, 6))
    ('partial 3', 'sync')
    >>> q = Policy.parse("partial 3 when same slowest for 3 else sync")
    >>> w = Watch(q)
    >>> [w.decide(c) for c in [(1, 1, 0), (1, 1, 1), (2, 2, 1), (3, 3, 2), (4, 3, 4)]]
    ['sync', 'sync', 'sync', 'partial 3', 'sync']
    >>> w = Watch(Policy.parse("partial 3 when same slowest for 2 else sync"))
    >>> seen = [(1, 1, 1, 0), (0, 0, 0, 0), (1, 1, 1, 0)] + [(0, 0, 1, 0)] * 6
    >>> said = [w.decide(c) for c in seen]
    >>> said.index("partial 3"), said.count("partial 3"), said[-1]
    (2, 6, 'sync')
    >>> w = Watch(Policy.parse("partial 3 when lag >= 2 keep 2 else sync"))
    >>> [w.decide(c) for c in [(2, 0), (1, 1), (2, 2), (3, 3)]]
    ['partial 3', 'partial 3', 'partial 3', 'sync']

A policy is ``MODE when CONDITION [keep K] else MODE`` (``when`` clauses can be chained:
the first that holds wins; ``keep K``: the clause stays in force for K more samples after
its condition last held, so that a mode which removes its own cause, as partial rounds
let a straggler catch up, does not flip back at once). Conditions, over the workers' epoch
clocks that the switch keeps (``controller/systems/sync_modes.py``, sampled by the watcher):

- ``lag >= N``: the fastest worker is at least N epochs ahead of the slowest;
- ``same slowest for K`` (K up to 256): the last K samples that had one slowest worker (ties are
  skipped) had the same one (the seed's "the same worker is last for K rounds"), and
  they all fall within the last 4K samples: a worker not seen last lately is not slow
  any more. (Under partial rounds a straggler back at normal speed catches up by
  skipping a compute and then races the others for the last place; the samples then
  show ties or one worker ahead, so its old samples age out and the decision can go
  back to sync.)

Modes are ``controller.systems.sync_modes.Mode`` texts (``sync``, ``partial K [bound S]``,
``bounded S``, ``async``). ``python -m controller.systems.sync_policy --controller URL --job J
--policy "..."`` watches job J through the daemon's API (``GET /jobs/{id}/sync``) and
changes its mode (``POST /jobs/{id}/mode``) whenever the decision differs from the mode
the switch holds, read at every sample (so a swap made by someone else is seen); a change
the switch cannot take yet (the previous swap still running) is tried again at the next
sample, and a transient error (daemon unreachable, 5xx) after a backoff; only a job that is
gone (404, 400) ends the watch.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from controller.jobs.job import JobError
from wire.serial import distance

Condition = Callable[[Sequence[int], "deque[int | None]"], bool]
_MODE = r"(sync|async|partial \d+(?: bound \d+)?|bounded \d+)"
_LAG = re.compile(r"lag >= (\d+)")
_SAME = re.compile(r"same slowest for (\d+)")
SEEN_WITHIN = 4  # same slowest for K: its last K samples within the last 4K samples
GONE = (400, 404)  # the job does not exist, or has no mode: the watch ends
MAX_BACKOFF_S = 5.0


def _lag_at_least(n: int) -> Condition:
    def holds(clocks: Sequence[int], _slowest: deque[int | None]) -> bool:
        return max(clocks) - min(clocks) >= n

    return holds


def _same_slowest_for(k: int) -> Condition:
    def holds(_clocks: Sequence[int], slowest: deque[int | None]) -> bool:
        # slowest: per sample, the one slowest worker (None: a tie or everyone level).
        named = [s for s in list(slowest)[-SEEN_WITHIN * k :] if s is not None]
        last = named[-k:]
        return len(last) == k and all(s == last[0] for s in last)

    return holds


@dataclass(frozen=True)
class Rule:
    mode: str
    condition: Condition
    text: str
    keep: int = 0


@dataclass(frozen=True)
class Policy:
    """Rules tried in order, and the mode when none holds."""

    rules: tuple[Rule, ...]
    otherwise: str
    text: str

    @classmethod
    def parse(cls, text: str) -> Policy:
        t = " ".join(text.lower().split())
        m = re.fullmatch(rf"(.*) else {_MODE}", t)
        if m is None:
            raise JobError(f"a policy is 'MODE when CONDITION [...] else MODE', got {text!r}")
        rules = []
        for part in m.group(1).split(" else "):
            r = re.fullmatch(rf"{_MODE} when (.+)", part)
            if r is None:
                raise JobError(f"policy: expected 'MODE when CONDITION', got {part!r}")
            mode, cond = r.group(1), r.group(2)
            keep = 0
            if (k := re.fullmatch(r"(.+) keep (\d+)", cond)) is not None:
                cond, keep = k.group(1), int(k.group(2))
            if (lag := _LAG.fullmatch(cond)) is not None:
                rules.append(Rule(mode, _lag_at_least(int(lag.group(1))), cond, keep))
            elif (same := _SAME.fullmatch(cond)) is not None and 1 <= int(same.group(1)) <= 256:
                rules.append(Rule(mode, _same_slowest_for(int(same.group(1))), cond, keep))
            else:
                raise JobError(
                    f"policy: unknown condition {cond!r} (known: 'lag >= N', 'same slowest for K')"
                )
        return cls(tuple(rules), m.group(2), t)

    def __repr__(self) -> str:
        return f"Policy({self.text!r})"


class Watch:
    """A policy applied to a stream of clock samples: ``decide`` says the mode for now."""

    def __init__(self, policy: Policy, history: int = 1024) -> None:
        self.policy = policy
        self.slowest: deque[int | None] = deque(maxlen=history)
        self._since = [10**9] * len(policy.rules)  # samples since each condition held

    def decide(self, clocks: Sequence[int]) -> str:
        low = min(clocks)
        at_low = [i for i, c in enumerate(clocks) if c == low]
        self.slowest.append(at_low[0] if len(at_low) == 1 else None)
        for i, rule in enumerate(self.policy.rules):
            held = rule.condition(clocks, self.slowest)
            self._since[i] = 0 if held else self._since[i] + 1
        for i, rule in enumerate(self.policy.rules):
            if self._since[i] <= rule.keep:
                return rule.mode
        return self.policy.otherwise


def relative_clocks(workers: Sequence[int], slowest: int) -> list[int]:
    """Clocks as epochs past the slowest one (they are 32-bit serial numbers)."""
    return [distance(c, slowest) for c in workers]


def watch_job(
    api: object,
    job_id: int,
    policy: Policy,
    period: float,
    stop: Callable[[], bool],
    on_change: Callable[[float, str, int], None] | None = None,
) -> list[tuple[float, str, int]]:
    """Sample the job's clocks every ``period`` seconds through the daemon's API and change
    its mode when the decision changes, until ``stop()``; returns (time, mode, boundary)
    of every change made."""
    from controller.api_client import ApiError

    watch, changes, failures = Watch(policy), [], 0
    while not stop():
        try:
            state = api.sync_state(job_id)  # type: ignore[attr-defined]
        except ApiError as err:
            if err.status in GONE:
                break  # the job is gone, or no longer has a mode
            failures += 1  # transient (unreachable, 5xx): again after a backoff
            time.sleep(min(period * 2**failures, MAX_BACKOFF_S))
            continue
        failures = 0
        current = state["mode"]  # the switch's, every sample: another client may swap too
        want = watch.decide(relative_clocks(state["clocks"], state["slowest"]))
        if want != current:
            try:
                got = api.set_mode(job_id, want)  # type: ignore[attr-defined]
                changes.append((time.time(), want, int(got["boundary_epoch"])))
                if on_change is not None:
                    on_change(*changes[-1])
            except ApiError:
                pass  # the previous change is still in progress, or transient: next sample
        time.sleep(period)
    return changes


def main(argv: list[str] | None = None) -> int:
    from controller.api_client import ControllerApi

    ap = argparse.ArgumentParser(prog="python -m controller.systems.sync_policy")
    ap.add_argument("--controller", required=True, help="daemon API URL")
    ap.add_argument("--job", type=int, required=True)
    ap.add_argument("--policy", required=True, help="e.g. 'partial 3 when lag >= 2 else sync'")
    ap.add_argument("--period", type=float, default=0.2, help="seconds between samples")
    a = ap.parse_args(argv)
    try:
        policy = Policy.parse(a.policy)
    except JobError as e:
        print(f"sync_policy: {e}", file=sys.stderr)
        return 2
    api = ControllerApi(a.controller, timeout=10.0)

    def show(t: float, mode: str, boundary: int) -> None:
        print(f"{t:.3f} job {a.job}: {mode} from epoch {boundary}", flush=True)

    watch_job(api, a.job, policy, a.period, lambda: False, show)
    return 0


if __name__ == "__main__":
    sys.exit(main())
