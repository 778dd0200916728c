"""PyTorch DDP communication hook: gradient buckets summed through the switch.

Example (a world of one: the hook runs on the hosts, a ring of one, and averages)::

    import torch, torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    from inclib.torch_ddp import register_switch_hook, session_for_ddp

    dist.init_process_group("gloo", init_method="tcp://10.0.0.1:29500", rank=r, world_size=4)
    model = DDP(torch.nn.Linear(64, 10))
    session = session_for_ddp("unix:run/x/controller.sock", name="digits")
    register_switch_hook(model, session)   # from now on, backward() all-reduces via inclib
    ...
    session.close(); release_ddp_session(session)

``session_for_ddp``: rank 0 asks the controller for a job for the whole process group
(``inclib.admit``) and broadcasts the plan over the group, so every rank takes the same
path, switch or hosts; each rank then joins it. Worker i's address for the host-only path
is ``peers[i]`` (default 10.0.0.{i+1}).

The hook (``switch_allreduce_hook``) is registered with DDP's public
``register_comm_hook``; no change to PyTorch. It takes each gradient bucket's flat float32
buffer (a numpy view of its memory) and, once the iteration's last bucket is in
(``GradBucket.is_last``), sums them all, in bucket order, in one ``Session.allreduce``
(per-block scaling, one integer call per iteration once the bounds are agreed, every step
vectorised, ``inclib/block_quantize.py``: error at most n / (2 s_b) per element of the
sum, so 1 / (2 s_b) of the average), divides by the world size into the buckets and
completes their futures. Fused, as Horovod's tensor fusion does: each call on the switch
costs a window's ramp, the last round trip, the ranks' start skew and often a second call
for the blocks that outgrew their bounds, and the large model's first layer, whose bucket
comes last, leaves almost no backward computation to overlap (``tests/bench/ddp.py``, one
call per bucket: ``register_switch_hook(..., fuse=False)``).
Every rank receives the same bits from the switch, so the replicas stay identical.
Buckets reach the hook in the same order on every rank (DDP guarantees it once the first
iteration rebuilt its buckets), which is all the session needs. CPU tensors only.
"""

# No `from __future__ import annotations`: DDP checks the hook's annotations at run time.

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from inclib.plan import Plan, admit
from inclib.session import Session, join

#: Values per packet of a DDP job on the switch (netreduce): 578-byte frames carry 512 bytes
#: of gradients (0.89 of the link) where 32 slots' 194-byte frames carry 128 (0.66), and a
#: bucket takes a quarter of the packets. On unshaped veths the frames, not the bytes, cost
#: p4sim's CPU; 224 values per packet made a 1.1M call ~1.5x faster there, but BMv2 ran out of
#: memory holding that many register arrays (docs/architecture.md).
DDP_SLOTS = 128


@dataclass
class HookState:
    """What the hook carries: the session, the buckets waiting for the iteration's last
    (``fuse``), and what it measured."""

    session: Session
    fuse: bool = True
    buckets: int = 0
    values: int = 0
    max_error_bound: float = 0.0  # largest per-element bound on the averaged gradient
    seconds: list[float] = field(default_factory=list)  # each all-reduce's time in the hook
    pending: list[tuple[int, torch.Tensor, torch.futures.Future[torch.Tensor]]] = field(
        default_factory=list
    )  # (bucket index, its buffer, its future)


def switch_allreduce_hook(
    state: HookState, bucket: dist.GradBucket
) -> torch.futures.Future[torch.Tensor]:
    """DDP comm hook: average the bucket over the ranks through ``state.session``. With
    ``state.fuse`` the buckets of an iteration wait for its last one and go in one call."""
    buf = bucket.buffer()
    if buf.device.type != "cpu" or buf.dtype != torch.float32:
        raise TypeError(
            f"the switch hook handles float32 CPU buckets, got {buf.dtype} {buf.device}"
        )
    fut: torch.futures.Future[torch.Tensor] = torch.futures.Future()
    state.pending.append((bucket.index(), buf, fut))
    if state.fuse and not bucket.is_last():
        return fut  # completed with the iteration's last bucket
    # In bucket order, whatever order they became ready in: the same vector on every rank.
    waiting, state.pending = sorted(state.pending, key=lambda p: p[0]), []
    _average([b for _, b, _ in waiting], state)
    for _, b, f in waiting:
        f.set_result(b)
    return fut


def _average(buffers: list[torch.Tensor], state: HookState) -> None:
    """Replace every buffer by its average over the ranks, in one all-reduce call."""
    t0 = time.perf_counter()
    n = state.session.n_workers
    views = [b.detach().numpy() for b in buffers]  # the buckets' own memory
    # One bucket: no copy in, none out; several: one copy into a fused vector and back.
    flat = views[0] if len(views) == 1 else np.concatenate(views)
    total = state.session.allreduce(flat)
    at = 0
    for v in views:
        np.divide(total[at : at + v.size], np.float32(n), out=v)
        at += v.size
    bound = state.session.last_error_bound
    if bound is not None and bound.size:
        state.max_error_bound = max(state.max_error_bound, float(bound.max()) / n)
    state.buckets += len(buffers)
    state.values += flat.size
    state.seconds.append(time.perf_counter() - t0)


def register_switch_hook(
    model: torch.nn.parallel.DistributedDataParallel, session: Session, fuse: bool = True
) -> HookState:
    """Send ``model``'s gradient buckets through ``session``; returns the hook's state.
    ``fuse``: an iteration's buckets in one call (the default), else one call per bucket."""
    state = HookState(session, fuse)
    model.register_comm_hook(state, switch_allreduce_hook)
    return state


def session_for_ddp(
    controller: str,
    *,
    name: str = "ddp",
    peers: list[str] | None = None,
    group: Any = None,
    **request: Any,
) -> Session:
    """One session per rank of the (initialised) default process group or ``group``, its
    transport open and every rank past it (a barrier). A netreduce job sends ``DDP_SLOTS``
    values per packet unless ``request`` says ``slots``."""
    rank, world = dist.get_rank(group), dist.get_world_size(group)
    if request.get("kind", "netreduce") == "netreduce":
        request.setdefault("slots", DDP_SLOTS)
    box: list[Any] = [None]
    if rank == 0:
        box[0] = admit(controller, world, name=name, peers=peers, **request).to_json()
    dist.broadcast_object_list(box, src=0, group=group)
    session = join(Plan.from_json(box[0]), rank)
    # One-time set-up outside the training loop, as gloo's: each rank opens its transport,
    # and the ranks leave together, so the first bucket does not wait for a late join.
    session.prepare_allreduce()
    dist.barrier(group)
    return session


def release_ddp_session(session: Session, group: Any = None) -> None:
    """Close every rank's session; rank 0 then gives the switch resources back."""
    session.close()
    dist.barrier(group)
    if dist.get_rank(group) == 0:
        session.plan.release()
