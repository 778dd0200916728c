"""Data-parallel training with inclib: PyTorch DDP, gradients summed in the switch.

One command runs it on the Mininet network (four workers h1..h4, one switch)::

    python -m examples.run training            # add --comm gloo for PyTorch's own all-reduce

Each worker process is ``python -m examples.training --controller URL --rank R --world 4``.
Rank 0 asks the controller for a job; when the switch cannot serve, every rank trains on
the hosts (ring all-reduce) and says so on one line. The model is a small MLP on the
digits images that scikit-learn ships (``--model small``, 2,410 parameters, or ``large``,
1.1M: ``hosts/mlp.py``); rank 0 writes the record (``--out``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import time

import numpy as np
import torch
import torch.distributed as dist
from sklearn.datasets import load_digits
from torch.nn.parallel import DistributedDataParallel as DDP

from hosts.mlp import MODELS, describe_model, layer_sizes
from inclib.torch_ddp import (
    DDP_SLOTS,
    register_switch_hook,
    release_ddp_session,
    session_for_ddp,
)


def digits(rank: int, world: int) -> tuple[torch.Tensor, ...]:
    """This rank's share of the training images, and the whole test set."""
    d = load_digits()
    order = np.random.default_rng(0).permutation(len(d.target))
    test, train = order[:360], order[360:][rank::world]
    x, y = torch.tensor(d.data / 16.0, dtype=torch.float32), torch.tensor(d.target)
    return x[train], y[train], x[test], y[test]


def mlp(model: str) -> torch.nn.Sequential:
    """The digits MLP ``model`` (``hosts/mlp.py``'s widths) in torch: dense layers, ReLU
    between them."""
    sizes = layer_sizes(model)
    layers: list[torch.nn.Module] = []
    for a, b in zip(sizes[:-1], sizes[1:], strict=False):
        layers += [torch.nn.Linear(a, b), torch.nn.ReLU()]
    return torch.nn.Sequential(*layers[:-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m examples.training")
    ap.add_argument("--controller", required=True)
    ap.add_argument("--rank", type=int, required=True)
    ap.add_argument("--world", type=int, default=4)
    ap.add_argument("--master", default="10.0.0.1:29500", help="rank 0's IP:PORT (gloo)")
    ap.add_argument("--comm", choices=("switch", "gloo"), default="switch")
    ap.add_argument("--kind", default="netreduce", help="switch job kind: netreduce, serene")
    ap.add_argument("--mode", default="sync", help="serene: synchronisation mode")
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--model", choices=list(MODELS), default="small", help="the digits MLP")
    ap.add_argument("--target", type=float, default=0.9, help="accuracy for time-to-accuracy")
    ap.add_argument("--lr", type=float, default=0.2, help="SGD learning rate (momentum 0.9)")
    ap.add_argument(
        "--slots", type=int, default=DDP_SLOTS,
        help=f"netreduce: values per packet, 32 or whole blocks of 32 up to 128 ({DDP_SLOTS})",
    )  # fmt: skip
    ap.add_argument(
        "--per-bucket", action="store_true",
        help="switch: one all-reduce per gradient bucket instead of one per iteration",
    )  # fmt: skip
    ap.add_argument("--peers", help="host-only path: every rank's IP[:PORT], comma-separated")
    ap.add_argument("--out", help="rank 0 writes its record here (JSON)")
    a = ap.parse_args(argv)
    peers = a.peers.split(",") if a.peers else None
    extra = {"mode": a.mode} if a.kind == "serene" else {"slots": a.slots}
    torch.set_num_threads(1)
    torch.manual_seed(0)
    dist.init_process_group("gloo", f"tcp://{a.master}", rank=a.rank, world_size=a.world)
    x, y, x_test, y_test = digits(a.rank, a.world)
    model = DDP(mlp(a.model))
    session = (
        session_for_ddp(a.controller, name="training", peers=peers, kind=a.kind, **extra)
        if a.comm == "switch"
        else None
    )
    hook = register_switch_hook(model, session, fuse=not a.per_bucket) if session else None
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=0.9)
    rec: dict = {
        "model": describe_model(a.model),
        "comm": a.comm,
        "on_switch": bool(session and session.on_switch),
        "slots": session.config["slots"] if session and session.on_switch else None,
        "epochs": [],
    }
    iters, trained = [], 0.0
    for epoch in range(a.epochs):
        order = torch.randperm(len(y), generator=torch.Generator().manual_seed(epoch))
        for batch in order.split(32):
            t0 = time.perf_counter()
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(x[batch]), y[batch]).backward()
            opt.step()
            iters.append(time.perf_counter() - t0)
        trained = sum(iters)
        with torch.no_grad():
            acc = int((model(x_test).argmax(1) == y_test).sum()) / len(y_test)
        rec["epochs"].append({"epoch": epoch, "accuracy": acc, "train_s": trained})
        print(f"rank {a.rank} epoch {epoch}: test accuracy {acc:.3f}", flush=True)
    params = torch.cat([p.detach().reshape(-1) for p in model.parameters()]).numpy()
    digest = hashlib.sha256(params.tobytes()).hexdigest()
    hit = [e["train_s"] for e in rec["epochs"] if e["accuracy"] >= a.target]
    rec.update(params_sha256=digest, time_per_iter_s=float(np.median(iters)), iterations=len(iters))
    rec["iteration_s"] = [round(t, 6) for t in iters]  # where a time to accuracy went
    rec["time_to_accuracy_s"] = hit[0] if hit else None
    rec["max_error_bound"] = hook.max_error_bound if hook else 0.0
    if hook is not None:  # where the switch hook's time went (tests/bench/ddp.py prints it)
        rec["hook_s"] = [round(t, 6) for t in hook.seconds]
        rec["transport"] = session.transport_stats() if session else {}
    digests: list = [None] * a.world
    dist.all_gather_object(digests, digest)
    rec["replicas_identical"] = len(set(digests)) == 1
    if session is not None:
        release_ddp_session(session)
    if a.rank == 0 and a.out:
        with open(a.out, "w") as f:
            json.dump(rec, f)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
