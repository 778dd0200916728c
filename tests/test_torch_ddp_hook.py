"""inclib's DDP comm hook in a world of one process (no root): the gradients it hands DDP
are the bucket's average within the block bound, and an iteration's buckets go in one
call when fused, one call each when not."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch==2.13.0 is in the test extra (make setup-test)")
dist = pytest.importorskip("torch.distributed")


@pytest.fixture
def world_of_one() -> Iterator[None]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dist.init_process_group("gloo", f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
    try:
        yield
    finally:
        dist.destroy_process_group()


def _model() -> Any:
    torch.manual_seed(3)
    return torch.nn.Sequential(
        torch.nn.Linear(8, 200), torch.nn.ReLU(), torch.nn.Linear(200, 200), torch.nn.ReLU(),
        torch.nn.Linear(200, 4),
    )  # fmt: skip


def _train(fuse: bool | None, steps: int = 3) -> tuple[list[list[np.ndarray]], Any]:
    """Per step, the gradients DDP left in the parameters; and the hook's state (None:
    no DDP, the reference)."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    from inclib.plan import admit
    from inclib.session import join
    from inclib.torch_ddp import register_switch_hook

    model: Any = _model()
    state, session = None, None
    if fuse is not None:
        # 10 KB buckets: the 42,000 parameters take several
        model = DDP(model, bucket_cap_mb=0.01)
        session = join(admit("unix:/nonexistent.sock", workers=1, peers=["127.0.0.1:0"]), 0)
        state = register_switch_hook(model, session, fuse=fuse)
    grads, calls = [], []
    rng = torch.Generator().manual_seed(0)
    for _ in range(steps):
        x, y = torch.randn(16, 8, generator=rng), torch.randint(0, 4, (16,), generator=rng)
        model.zero_grad()
        before = session.calls if session else 0
        torch.nn.functional.cross_entropy(model(x), y).backward()
        calls.append((session.calls if session else 0) - before)
        grads.append([p.grad.detach().numpy().copy() for p in model.parameters()])
    if session is not None:
        session.close()
    return grads, (state, calls)


@pytest.mark.parametrize("fuse", [True, False])
def test_the_hook_hands_ddp_the_average_within_the_block_bound(
    world_of_one: None, fuse: bool
) -> None:
    want, _ = _train(None)
    got, (state, _) = _train(fuse)
    bound = state.max_error_bound
    assert 0 < bound < 1e-6
    for step_want, step_got in zip(want, got, strict=True):
        for w, g in zip(step_want, step_got, strict=True):
            assert np.all(np.abs(g - w) <= bound + np.abs(w) * 2.0**-23)


def test_fused_buckets_take_one_call_per_iteration_unfused_one_per_bucket(
    world_of_one: None,
) -> None:
    _, (fused, fused_calls) = _train(True)
    _, (apart, apart_calls) = _train(False)
    assert apart.buckets == fused.buckets and max(apart_calls) >= 2  # DDP's own buckets
    assert fused_calls == [1, 1, 1]
    assert sum(apart_calls) == apart.buckets
    assert fused.values == apart.values == 3 * sum(p.numel() for p in _model().parameters())
