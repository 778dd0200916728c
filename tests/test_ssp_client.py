"""The pipelined all-reduce (hosts/serene/ssp_client.py) against the host parameter server: several
epochs in flight per worker, every epoch's sum exact to the quantisation bound and the
same on every worker, under loss."""

from __future__ import annotations

import numpy as np

from hosts.netreduce.allreduce import AllReduceClient
from hosts.netreduce.ps import ParameterServer
from hosts.serene.ssp_client import PipelinedAllReduce
from hosts.transport.quantize import choose_scale
from hosts.transport.udp import Endpoint, ImpairedEndpoint
from tests.worker_threads import run_threads

LOCAL = ("127.0.0.1", 0)


def test_epochs_in_flight_at_once_each_sum_to_their_own_vectors() -> None:
    n, size, epochs, ahead = 3, 500, 6, 3  # 16 packets per epoch, window 8: epochs overlap
    rng = np.random.default_rng(5)
    xs = rng.uniform(-1, 1, size=(epochs, n, size)).astype(np.float32)
    ps = ParameterServer(n, bind=LOCAL).start()
    try:

        def worker(w: int) -> list[np.ndarray]:
            ep = ImpairedEndpoint(Endpoint(LOCAL), loss=0.05, seed=w)
            c = AllReduceClient(4, w, n, 0, 8, 8, dest=ps.address, endpoint=ep, timeout=0.02)
            pipe = PipelinedAllReduce(c)
            got = []
            try:
                for e in range(epochs):
                    pipe.submit(e, xs[e, w], bound=1.0)
                    if e >= ahead:  # needs the result of e - ahead only now
                        got.append(pipe.result(e - ahead)[0])
                got += [pipe.result(e)[0] for e in range(epochs - ahead, epochs)]
            finally:
                pipe.close()
                c.close()
            return got

        results = run_threads(n, worker)
    finally:
        ps.stop()
    bound = n * 0.5 / choose_scale(1.0, n)
    for e in range(epochs):
        exact = xs[e].astype(np.float64).sum(axis=0)
        assert np.all(np.abs(results[0][e] - exact) <= bound + np.abs(exact) * 2.0**-23), e
        for other in results[1:]:
            np.testing.assert_array_equal(other[e], results[0][e])
