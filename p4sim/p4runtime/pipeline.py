"""One installed forwarding pipeline: P4Info, device config, cookie, and the switch.

Example::

    pipe = build_pipeline(config, load_switch_from_device_config)  # P4RTError if unusable
    pipe.index.table(tid); pipe.target.table(name)
"""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from finsy.proto import p4i, p4r

from p4sim.p4runtime.codec import P4InfoIndex
from p4sim.p4runtime.errors import P4RTError, invalid
from p4sim.p4runtime.target import Target

log = logging.getLogger("p4sim.p4runtime")

SwitchFactory = Callable[[bytes], Any]


def load_switch_from_device_config(
    device_config: bytes,
    log: Any = None,
    tm: Any = None,
    backend: str = "python",
    source_dirs: Sequence[Path] = (),
) -> Any:
    """Default switch factory: unpack p4sim's source bundle and compile it (``log``: the
    Switch's per-packet trace hook; ``tm``: the egress queues, kept across pipelines;
    ``backend``: python or native, see p4sim/native/backend.py). p4c's BMv2 JSON is
    accepted too: its P4 source, found under ``source_dirs`` or the working directory, is
    compiled (``p4sim.bmv2_json``)."""
    from p4sim.bmv2_json import Bmv2JsonError, looks_like_bmv2_json, switch_from_bmv2_json
    from p4sim.p4info import DeviceConfigError, unpack_device_config
    from p4sim.switch import Switch

    if looks_like_bmv2_json(device_config):
        dirs = [*source_dirs, Path.cwd()]
        try:
            return switch_from_bmv2_json(device_config, dirs, log=log, tm=tm, backend=backend)[0]
        except Bmv2JsonError as err:
            raise invalid(str(err)) from None
    try:
        with tempfile.TemporaryDirectory(prefix="p4sim-pipeline-") as tmp:
            main, options = unpack_device_config(device_config, tmp)
            return Switch.from_file(
                main,
                include_dirs=tuple(options["include_dirs"]),
                defines=options["defines"],
                log=log,
                tm=tm,
                backend=backend,
                target=options["target"],
            )
    except DeviceConfigError as err:
        raise invalid(str(err)) from None


@dataclass
class Pipeline:
    p4info: p4i.P4Info
    device_config: bytes
    cookie: int
    target: Target
    index: P4InfoIndex = field(init=False)
    digest_config: dict[int, p4r.DigestEntry.Config] = field(default_factory=dict)
    mc_meta: dict[int, tuple[bool, bytes]] = field(default_factory=dict)
    clone_bytes: dict[int, bool] = field(default_factory=dict)
    entry_meta: dict[tuple[str, int], bytes] = field(default_factory=dict)  # TableEntry.metadata
    _actions: dict[str, p4i.Action] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.index = P4InfoIndex(self.p4info)

    def action_by_switch_name(self, name: str) -> p4i.Action:
        """The P4Info action the switch calls ``name``."""
        got = self._actions.get(name)
        if got is None:
            for a in self.p4info.actions:
                if self.target.action_name(a.preamble.name) == name:
                    got = self._actions[name] = a
                    break
            else:
                raise P4RTError(_internal(), f"action {name} is not in the P4Info")
        return got

    def verify(self) -> None:
        """Every P4Info object must exist in the loaded program (INVALID_ARGUMENT if not)."""
        t = self.target
        checks: list[tuple[Any, Callable[[str], Any]]] = [
            (self.p4info.tables, t.table),
            (self.p4info.actions, t.action_name),
            (self.p4info.counters, t.counter),
            (self.p4info.direct_counters, t.direct_counter),
            (self.p4info.meters, t.meter),
            (self.p4info.direct_meters, t.direct_meter),
            (self.p4info.registers, t.register),
            (self.p4info.action_profiles, t.action_profile),
        ]
        for items, resolve in checks:
            for item in items:
                try:
                    resolve(item.preamble.name)
                except P4RTError as err:
                    raise invalid(f"P4Info does not match the P4 program: {err.message}") from None


def _internal():  # type: ignore[no-untyped-def]
    import grpc

    return grpc.StatusCode.INTERNAL


def build_pipeline(
    config: p4r.ForwardingPipelineConfig, factory: SwitchFactory, reuse: Target | None = None
) -> Pipeline:
    """Compile ``config.p4_device_config`` (unless ``reuse`` gives the target) and check the
    P4Info against it."""
    if not config.HasField("p4info") or not config.p4info.ListFields():
        raise invalid("ForwardingPipelineConfig has no P4Info")
    if reuse is None:
        try:
            switch = factory(bytes(config.p4_device_config))
        except P4RTError:
            raise
        except Exception as err:  # P4Error and friends: the program does not compile
            raise invalid(f"p4_device_config does not hold a usable P4 program: {err}") from None
        reuse = Target(switch)
    pipe = Pipeline(
        p4info=config.p4info,
        device_config=bytes(config.p4_device_config),
        cookie=config.cookie.cookie,
        target=reuse,
    )
    pipe.verify()
    return pipe
