"""ASK keys keep their type across the network (issue 26, case 5): str, bytes, int and
tuples of them (nested) come back exactly, 1 and "1" stay two keys, and a key of any other
type is refused in one line naming it. The mapper and reducer processes' code
(``hosts/ask/run.py``) runs here over the loopback, without a switch (every tuple reaches
the reducer, as when the switch absorbs nothing); the controller's answers are stubbed."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Hashable
from pathlib import Path
from typing import Any

import pytest

from controller.api_client import ControllerApi
from hosts.ask import control, run
from hosts.ask.mapper import MapperConfig, MapperFlow
from inclib.host_reduce import HostReducer, send_pairs

WAIT_S = 60.0  # only a bound for a failing run

MAPPER_KEYS: list[list[Hashable]] = [
    ["1", 1, b"1", (1, "1"), ("a", (b"\x00\xff", -(2**70))), "", (), b"", "w\u00e9"],
    [1, "1", (1, "1"), ((1,),), (b"1",), 2**40],
]


def exact(counts: dict[Hashable, int]) -> list[tuple[str, int]]:
    """Comparable with the types: 1 == True and (1,) != [1] are not enough."""
    return sorted((repr(k), v) for k, v in counts.items())


def expected() -> dict[Hashable, int]:
    out: dict[Hashable, int] = {}
    for w, ks in enumerate(MAPPER_KEYS):
        for i, k in enumerate(ks):
            out[k] = out.get(k, 0) + (i + 1) * (w + 1)
    return out


def free_port(kind: socket.SocketKind) -> int:
    with socket.socket(socket.AF_INET, kind) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_keys_of_every_type_cross_the_network_exactly(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(control, "INC_UDP_PORT", free_port(socket.SOCK_DGRAM))
    monkeypatch.setattr(control, "CONTROL_PORT", free_port(socket.SOCK_STREAM))
    monkeypatch.setattr(
        ControllerApi,
        "job",
        lambda self, job_id: {
            "n_workers": 2, "region": {"offset": 0, "size": 0},
            "workers": [{"worker_id": w, "ip": "127.0.0.1"} for w in range(2)],
        },
    )  # no rows to drain: the tuples all reach the reducer; the mappers on this host  # fmt: skip
    monkeypatch.setattr(
        ControllerApi,
        "worker_config",
        lambda self, job_id, worker_id: {
            "part_base": 0, "part_size": 4, "window": 4, "agg_ip": "127.0.0.1",
        },
    )  # fmt: skip
    out = tmp_path / "result.json"
    argv = ["reducer", "--controller", "unix:/nonexistent", "--job-id", "1", "--out", str(out)]
    reducer = threading.Thread(target=run.main, args=(argv,), daemon=True)
    reducer.start()
    deadline = time.monotonic() + WAIT_S
    while True:  # the reducer listens once it is set up
        try:
            ctl = run.subscribe("127.0.0.1")
            break
        except ConnectionRefusedError:
            assert time.monotonic() < deadline, "the reducer never listened"
            time.sleep(0.05)
    record: dict[str, Any] = {}
    collector = threading.Thread(
        target=lambda: record.update(run.wait_record(ctl, WAIT_S)), daemon=True
    )
    collector.start()
    errors: list[BaseException] = []

    def mapper(w: int) -> None:
        counts = {k: (i + 1) * (w + 1) for i, k in enumerate(MAPPER_KEYS[w])}
        try:
            run.send_partition("unix:/nonexistent", 1, w, [counts], rto=0.02)
        except BaseException as err:  # the test reports it
            errors.append(err)

    mappers = [threading.Thread(target=mapper, args=(w,), daemon=True) for w in (0, 1)]
    for t in mappers:
        t.start()
    for t in [*mappers, collector, reducer]:
        t.join(WAIT_S)
    assert not errors, errors
    assert "result" in record, "the reducer sent no record"
    assert exact(record["result"]) == exact(expected())
    assert exact(run.read_record(out)["result"]) == exact(expected())


def test_the_host_path_keeps_key_types_too() -> None:
    r = HostReducer(("127.0.0.1", 0), mappers=2)
    pairs = [[(k, (i + 1) * (w + 1)) for i, k in enumerate(ks)] for w, ks in enumerate(MAPPER_KEYS)]
    senders = [threading.Thread(target=send_pairs, args=(r.address, p)) for p in pairs]
    for t in senders:
        t.start()
    got = r.collect(timeout=WAIT_S)
    for t in senders:
        t.join(WAIT_S)
    assert exact(got) == exact(expected())


@pytest.mark.parametrize("key", [1.5, True, None, frozenset({1}), ("a", 2.0)])
def test_other_key_types_are_refused_in_one_line_naming_the_type(key: Any) -> None:
    m = MapperFlow(MapperConfig(job_id=1, flow=0, part_base=0, part_size=4, window=4))
    with pytest.raises(ValueError, match=r"ASK keys are str, bytes, int or tuples") as info:
        m.add_counts({key: 1})
    assert "\n" not in str(info.value)
    assert type(key[1] if isinstance(key, tuple) else key).__name__ in str(info.value)


def test_counts_as_columns_come_back_as_sent_and_malformed_columns_are_refused() -> None:
    from hosts.ask.keys import decode_counts, encode_columns

    counts = {"a": 1, 7: -2, b"\x00": 3, ("t", 1): 2**40, "7": 5}
    assert decode_counts(json.loads(json.dumps(encode_columns(counts)))) == counts
    plain = {f"w{i}": i for i in range(1000)}
    assert decode_counts(json.loads(json.dumps(encode_columns(plain)))) == plain
    for bad in ({"keys": ["a"], "values": []}, {"keys": ["a"], "values": [1.5]},
                {"keys": "a", "values": [1]}, {"keys": [True], "values": [1]}):  # fmt: skip
        with pytest.raises(ValueError):
            decode_counts(bad)
