"""The policy watcher against a daemon that other clients also talk to, and that fails now
and then: it judges by the mode the switch holds at every sample, and a transient error
does not end the policy (docs/protocol.md, "Synchronisation modes", control plane)."""

from __future__ import annotations

from typing import Any

from controller.api_client import ApiError
from controller.systems.sync_policy import Policy, watch_job


class FakeApi:
    """A job's sync state per sample; ``script`` items: clocks, a mode set by someone else
    ("manual MODE"), or an error status to raise once."""

    def __init__(self, script: list[Any]) -> None:
        self.script = script
        self.mode = "sync"
        self.sets: list[str] = []

    def sync_state(self, job_id: int) -> dict[str, Any]:
        step = self.script.pop(0)
        if isinstance(step, int):
            raise ApiError("bad gateway", step)
        if isinstance(step, str):  # another client swapped the mode; clocks level
            self.mode = step.removeprefix("manual ")
            step = (3, 3)
        return {"mode": self.mode, "clocks": list(step), "slowest": min(step)}

    def set_mode(self, job_id: int, mode: str) -> dict[str, Any]:
        self.sets.append(mode)
        self.mode = mode
        return {"boundary_epoch": 1}


def run(api: FakeApi, policy: str) -> list[str]:
    n = len(api.script)
    samples = iter(range(n))
    watch_job(api, 1, Policy.parse(policy), 0.0, lambda: next(samples, None) is None)
    return api.sets


def test_a_manual_swap_is_seen_and_the_policy_applies_again() -> None:
    api = FakeApi([(2, 0), "manual sync", (2, 0)])
    assert run(api, "partial 1 when lag >= 2 else sync") == ["partial 1", "partial 1"]


def test_a_transient_error_does_not_end_the_policy() -> None:
    api = FakeApi([502, (2, 0)])
    assert run(api, "partial 1 when lag >= 2 else sync") == ["partial 1"]


def test_a_job_that_is_gone_ends_the_watch() -> None:
    api = FakeApi([404, (2, 0)])
    assert run(api, "partial 1 when lag >= 2 else sync") == []
