"""PTF base class for any P4 program: the switch programmed over P4Runtime per test.

Example (a PTF test module next to this file)::

    from p4runtime_ptf import P4RuntimeTest

    class ForwardsToPortTwo(P4RuntimeTest):
        def runTest(self):
            self.insert([table_entry("MyIngress.l2", {"hdr.ethernet.dstAddr": MAC},
                                     "MyIngress.fwd", port=2)])
            testutils.send_packet(self, 1, pkt)
            testutils.verify_packet(self, pkt, 2)

``setUp`` connects to the switch named by the test parameters, becomes primary and pushes
the pipeline (P4Info + device config: p4sim's bundle or BMv2's JSON) with
VERIFY_AND_COMMIT, which gives every test fresh tables, registers and counters, the way
PTF users program BMv2. What a test writes through :meth:`insert` and
:meth:`set_multicast_group` is deleted again after the test (a cleanup).

Test parameters (``ptf --test-params "grpcaddr='127.0.0.1:50051';p4info='...';..."``):
``grpcaddr``, ``device_id`` (default 0), ``p4info`` and ``config`` (files), and, for
BMv2, ``thrift_port``: simple_switch_grpc refuses register access over P4Runtime, so
registers then go through ``simple_switch_CLI`` (see controller/p4rt/registers.py).

The P4Runtime client is the controller's (``controller.p4rt.p4runtime_client``), run on an
asyncio loop in a background thread so that these synchronous unittest methods can call it
and its stream keeps being served between calls.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Coroutine, Iterable
from typing import Any, TypeVar

import ptf
from finsy import P4MulticastGroupEntry
from ptf import testutils
from ptf.base_tests import BaseTest

from controller.p4rt.p4runtime_client import Pipeline, SwitchConnection, SwitchSpec

T = TypeVar("T")
CALL_TIMEOUT = 60.0  # one P4Runtime call (a pipeline push compiles the program on p4sim)
WAIT_TIMEOUT = 10.0  # how long a wait for a switch-side signal (a counter) may take


class _Loop:
    """One event loop in a daemon thread for the whole PTF run."""

    _loop: asyncio.AbstractEventLoop | None = None

    @classmethod
    def run(cls, coro: Coroutine[Any, Any, T], timeout: float = CALL_TIMEOUT) -> T:
        if cls._loop is None:
            cls._loop = asyncio.new_event_loop()
            threading.Thread(target=cls._loop.run_forever, name="p4rt-loop", daemon=True).start()
        return asyncio.run_coroutine_threadsafe(coro, cls._loop).result(timeout)


def _param(name: str, default: Any = None) -> Any:
    value = testutils.test_param_get(name, default)
    if value is None:
        raise RuntimeError(
            f"PTF test parameter {name!r} is missing: give --test-params"
            " \"grpcaddr='HOST:PORT';p4info='FILE';config='FILE'\""
        )
    return value


class P4RuntimeTest(BaseTest):
    """A PTF test whose switch gets the pipeline over P4Runtime in ``setUp``."""

    def setUp(self) -> None:
        super().setUp()
        self.dataplane = ptf.dataplane_instance
        self.dataplane.flush()
        thrift = testutils.test_param_get("thrift_port")
        self.spec = SwitchSpec(
            device_id=int(_param("device_id", 0)),
            address=_param("grpcaddr"),
            name="dut",
            thrift_port=int(thrift) if thrift else None,
        )
        pipeline = Pipeline.from_files(_param("p4info"), _param("config"))
        self.sw = SwitchConnection(self.spec, pipeline)
        self._undo: list[Callable[[], Coroutine[Any, Any, None]]] = []
        # a cleanup, not tearDown: it runs also when setUp (here or in a subclass) fails
        # half-way, so the stream never outlives its test and keeps the election id
        self.addCleanup(self._undo_and_close)
        _Loop.run(self.sw.connect(force_pipeline=True))
        if not self.sw.is_primary:
            raise RuntimeError(f"another P4Runtime client (election {self.sw.primary_id}) rules")

    def _undo_and_close(self) -> None:
        try:
            for undo in reversed(self._undo):
                _Loop.run(undo())
        finally:
            _Loop.run(self.sw.close())

    # -- writing (undone after the test) ---------------------------------------------------

    def insert(self, entities: Iterable[Any]) -> None:
        """Insert table entries (finsy entities, e.g. ``table_entry(...)``)."""
        ents = list(entities)
        _Loop.run(self.sw.insert(ents))
        self._undo.append(lambda: self.sw.delete(ents, strict=False))

    def set_multicast_group(self, group_id: int, replicas: Iterable[tuple[int, int]]) -> None:
        """Create a multicast group of ``(egress port, replication id)`` replicas."""
        _Loop.run(self.sw.set_multicast_group(group_id, list(replicas)))
        self._undo.append(lambda: self.sw.delete([P4MulticastGroupEntry(group_id)], strict=False))

    def call(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run any ``SwitchConnection`` coroutine, e.g. ``self.call(self.sw.read(...))``."""
        return _Loop.run(coro)

    # -- reading ---------------------------------------------------------------------------

    def counter(self, name: str, index: int) -> int:
        """Packets counted in cell ``index`` of the indirect counter ``name`` (P4Info name
        or unique suffix)."""
        cells = _Loop.run(self.sw.read_counter(name, index))
        return cells.get(index, (0, 0))[0]

    def counters(self, name: str) -> dict[int, int]:
        """Packets of every cell of counter ``name``."""
        return {i: pkts for i, (pkts, _) in _Loop.run(self.sw.read_counter(name)).items()}

    def register(self, name: str, index: int) -> int:
        return _Loop.run(self.sw.read_register(name, index))

    def wait_for(self, what: str, predicate: Callable[[], bool]) -> None:
        """Poll ``predicate`` (a switch-side signal such as a counter) until it holds."""
        deadline = time.monotonic() + WAIT_TIMEOUT
        while not predicate():
            if time.monotonic() > deadline:
                self.fail(f"timed out after {WAIT_TIMEOUT:.0f}s waiting for {what}")
            time.sleep(0.02)
