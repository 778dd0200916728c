"""Data-parallel training written directly against the transport: the same application as
``examples/training.py``, with the controller's API, the all-reduce client and the DDP hook
by hand (no inclib).

Run on Mininet: ``python -m examples.run training --direct``. What it lacks next to the
library version: no host-only fallback (a job the switch cannot take stops the run), one
scale for the whole bucket instead of one per block, NetReduce jobs only.
"""

import argparse
import hashlib
import json
import time

import numpy as np
import torch
import torch.distributed as dist
from sklearn.datasets import load_digits
from torch.nn.parallel import DistributedDataParallel as DDP

from controller.api_client import ControllerApi
from hosts.netreduce.allreduce import AllReduceClient


def digits(rank: int, world: int) -> tuple[torch.Tensor, ...]:
    d = load_digits()
    order = np.random.default_rng(0).permutation(len(d.target))
    test, train = order[:360], order[360:][rank::world]
    x, y = torch.tensor(d.data / 16.0, dtype=torch.float32), torch.tensor(d.target)
    return x[train], y[train], x[test], y[test]


def switch_client(api: ControllerApi, rank: int, world: int) -> tuple[AllReduceClient, int]:
    """Rank 0 submits the job; every rank reads its settings and opens its client."""
    box: list = [None]
    if rank == 0:
        box[0] = api.submit({"kind": "netreduce", "workers": world, "window": 64})["job_id"]
    dist.broadcast_object_list(box, src=0)
    cfg = api.worker_config(box[0], rank)
    client = AllReduceClient(
        cfg["job_id"], cfg["worker_id"], cfg["n_workers"], cfg["region_offset"],
        cfg["region_size"], cfg["window"], dest=(cfg["agg_ip"], cfg["udp_port"]),
        slots=cfg["slots"], timeout=0.05, total_timeout=60.0,
    )  # fmt: skip
    return client, box[0]


def hook(client: AllReduceClient, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
    buf = bucket.buffer()
    total = client.allreduce(buf.detach().numpy())
    buf.copy_(torch.from_numpy(total)).div_(client.n_workers)
    fut: torch.futures.Future[torch.Tensor] = torch.futures.Future()
    fut.set_result(buf)
    return fut


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m examples.direct.training")
    ap.add_argument("--controller", required=True)
    ap.add_argument("--rank", type=int, required=True)
    ap.add_argument("--world", type=int, default=4)
    ap.add_argument("--master", default="10.0.0.1:29500")
    ap.add_argument("--comm", choices=("switch", "gloo"), default="switch")
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--lr", type=float, default=0.2)
    ap.add_argument("--out")
    a, _ = ap.parse_known_args(argv)
    torch.set_num_threads(1)
    torch.manual_seed(0)
    dist.init_process_group("gloo", f"tcp://{a.master}", rank=a.rank, world_size=a.world)
    x, y, x_test, y_test = digits(a.rank, a.world)
    model = DDP(
        torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.ReLU(), torch.nn.Linear(32, 10))
    )
    api = ControllerApi(a.controller, timeout=30.0)
    client, job_id = switch_client(api, a.rank, a.world) if a.comm == "switch" else (None, 0)
    if client is not None:
        model.register_comm_hook(client, hook)
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=0.9)
    rec: dict = {"comm": a.comm, "on_switch": client is not None, "epochs": []}
    iters: list[float] = []
    for epoch in range(a.epochs):
        order = torch.randperm(len(y), generator=torch.Generator().manual_seed(epoch))
        for batch in order.split(32):
            t0 = time.perf_counter()
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(x[batch]), y[batch]).backward()
            opt.step()
            iters.append(time.perf_counter() - t0)
        with torch.no_grad():
            acc = int((model(x_test).argmax(1) == y_test).sum()) / len(y_test)
        rec["epochs"].append({"epoch": epoch, "accuracy": acc, "train_s": sum(iters)})
        print(f"rank {a.rank} epoch {epoch}: test accuracy {acc:.3f}", flush=True)
    params = torch.cat([p.detach().reshape(-1) for p in model.parameters()]).numpy()
    digests: list = [None] * a.world
    dist.all_gather_object(digests, hashlib.sha256(params.tobytes()).hexdigest())
    rec.update(replicas_identical=len(set(digests)) == 1, iterations=len(iters))
    rec["time_per_iter_s"] = float(np.median(iters))
    if client is not None:
        client.close()
        dist.barrier()
        if a.rank == 0:
            api.cancel(job_id)
    if a.rank == 0 and a.out:
        with open(a.out, "w") as f:
            json.dump(rec, f)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
