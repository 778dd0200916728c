"""A relay between workers and a parameter server that loses, duplicates and reorders
datagrams both ways (seeded ImpairedEndpoints), so a test's hosts keep plain sockets.

Example::

    with ImpairingRelay(ps.address, 0.1, 0.05, 0.1, seed=5) as relay:
        client.dest = relay.address     # the workers send here; the relay learns them
"""

from __future__ import annotations

import threading

from hosts.transport.udp import Address, Endpoint, ImpairedEndpoint

LOCAL = ("127.0.0.1", 0)


class ImpairingRelay:
    """Workers <-> relay <-> server. A worker is learnt from its datagrams (byte 4 of the
    INC header is its worker id); what the server sends goes to ``destinations``."""

    def __init__(self, server: Address, loss: float, dup: float, reorder: float, seed: int):
        kw = dict(loss=loss, dup=dup, reorder=reorder)
        self.front = ImpairedEndpoint(Endpoint(LOCAL), seed=seed, **kw)  # type: ignore[arg-type]
        self.back = ImpairedEndpoint(Endpoint(LOCAL), seed=seed + 1, **kw)  # type: ignore[arg-type]
        self.server = server
        self.workers: dict[int, Address] = {}  # worker id -> its address, learnt
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)

    @property
    def address(self) -> Address:
        return self.front.address

    def destinations(self, payload: bytes) -> list[Address]:
        """Where a datagram from the server goes: the worker it names (NetReduce's PS)."""
        dest = self.workers.get(payload[4])
        return [] if dest is None else [dest]

    def _serve(self) -> None:
        while not self._stop.is_set():
            for payload, src in self.front.recv_many():
                self.workers[payload[4]] = src
                self.back.send_many([(payload, self.server)])
            for payload, _ in self.back.recv_many():
                self.front.send_many([(payload, d) for d in self.destinations(payload)])
            self.front.flush()
            self.back.flush()
            self.front.wait(0.001)

    def __enter__(self) -> ImpairingRelay:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5.0)
        self.front.close()
        self.back.close()


class MulticastRelay(ImpairingRelay):
    """What the server sends goes to every worker, as the switch's multicast of an ATP sum
    would (the ATP PS answers its jobs' result address: the relay)."""

    def destinations(self, payload: bytes) -> list[Address]:
        return list(self.workers.values())
