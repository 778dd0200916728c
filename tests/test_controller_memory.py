"""The switch memory manager and job request rules (unit tests, no switch)."""

from __future__ import annotations

import pytest

from controller.jobs.job import JobError
from controller.jobs.job_kinds import parse_request
from controller.jobs.memory_manager import MemoryManager, OutOfMemory, Region
from controller.systems.netreduce import NetReduce, NetReduceRequest


def test_allocation_is_first_fit_from_the_lowest_offset() -> None:
    mm = MemoryManager(pool_size=100)
    assert mm.allocate("a", 10) == Region(0, 10)
    assert mm.allocate("b", 20) == Region(10, 20)
    mm.free("a")
    assert mm.allocate("c", 30) == Region(30, 30)  # the 10-hole at 0 is too small
    assert mm.allocate("d", 5) == Region(0, 5)  # the first hole that fits


def test_freeing_neighbours_coalesces_into_one_block() -> None:
    mm = MemoryManager(pool_size=30)
    for owner in "abc":
        mm.allocate(owner, 10)
    mm.free("a")
    mm.free("c")
    assert mm.largest_free() == 10
    mm.free("b")  # merges with both neighbours
    assert [(s.offset, s.size, s.owner) for s in mm.segments()] == [(0, 30, None)]
    assert mm.allocate("big", 30) == Region(0, 30)


def test_exhausted_pool_raises_with_the_largest_free_block() -> None:
    mm = MemoryManager(pool_size=16)
    mm.allocate("a", 6)
    mm.allocate("b", 4)
    mm.free("a")
    with pytest.raises(OutOfMemory, match=r"largest free: 6"):
        mm.allocate("c", 7)
    assert mm.free_total() == 12


def test_segments_list_owners_and_holes_in_pool_order() -> None:
    mm = MemoryManager(pool_size=10)
    mm.allocate(1, 3)
    mm.allocate(2, 3)
    mm.free(1)
    assert [(s.offset, s.size, s.owner) for s in mm.segments()] == [
        (0, 3, None),
        (3, 3, 2),
        (6, 4, None),
    ]


def test_reserve_rebuilds_a_stored_layout_and_refuses_overlap() -> None:
    mm = MemoryManager(pool_size=64)
    mm.reserve(7, Region(16, 8))
    assert mm.allocate(8, 16) == Region(0, 16)
    assert mm.allocate(9, 4) == Region(24, 4)
    with pytest.raises(ValueError, match="not free"):
        mm.reserve(10, Region(20, 8))


def test_owner_cannot_hold_two_regions_and_unknown_owner_cannot_free() -> None:
    mm = MemoryManager(pool_size=8)
    mm.allocate("a", 2)
    with pytest.raises(ValueError):
        mm.allocate("a", 2)
    with pytest.raises(KeyError):
        mm.free("nobody")


def test_region_defaults_to_the_window_netreduce_rule() -> None:
    assert NetReduce().region_size(NetReduceRequest(workers=4, window=64)) == 64
    assert NetReduce().region_size(NetReduceRequest(workers=4, window=64, region_size=100)) == 100


@pytest.mark.parametrize("slots", [32, 64, 96, 128])
def test_a_netreduce_job_may_send_whole_blocks_of_slots(slots: int) -> None:
    assert parse_request({"workers": 2, "window": 4, "slots": slots}).slots == slots  # type: ignore[attr-defined]


def test_region_smaller_than_window_is_refused() -> None:
    with pytest.raises(JobError, match="size >= window"):
        parse_request({"workers": 2, "window": 16, "region_size": 8})


@pytest.mark.parametrize(
    "body, message",
    [
        ({"workers": 33, "window": 4}, "workers: Input should be less than or equal to 32"),
        ({"workers": 2, "window": 4, "slots": 16}, "32 slots per packet or whole blocks"),
        ({"workers": 2, "window": 4, "slots": 160}, r"\(32, 64, 96, 128\), got 160"),
        ({"kind": "serene", "workers": 2, "window": 4, "slots": 64}, "sends 32 slots"),
        ({"workers": 2, "window": 4, "worker_ports": [1]}, "lists 1 values for 2 workers"),
        ({"workers": 2, "window": 4, "worker_ports": [3, 3]}, "same switch port"),
        ({"workers": 2, "window": 4, "worker_ports": [True, 2]}, "worker_ports.0: .*integer"),
        ({"workers": 1, "window": 4, "worker_ips": ["10.0.0.300"]}, "not an IPv4 address"),
        ({"workers": 1, "window": 4, "worker_ips": [1]}, "worker_ips.0: .*string"),
        ({"workers": 1, "window": 4, "agg_ip": 5}, "agg_ip: .*string"),
        ({"workers": 1, "window": 4, "worker_macs": ["zz"]}, "worker_macs.0: String should match"),
        ({"workers": 1, "window": "4"}, "window: Input should be a valid integer"),
        ({"workers": 1, "window": 4, "name": 12345}, "name: Input should be a valid string"),
        ({"workers": 1, "window": 4, "name": "x" * 65}, "name: String should have at most 64"),
        ({"workers": 1, "window": 4, "name": {"a": [1]}}, "name: Input should be a valid string"),
        ({"workers": 1, "window": 4, "colour": "red"}, "colour: Extra inputs are not permitted"),
        ({"window": 4}, "workers: Field required"),
        ({"workers": 1, "window": 4, "kind": "gossip"}, "unknown job kind 'gossip'"),
        ([1, 2], "a job request is a JSON object"),
    ],
)
def test_bad_job_requests_name_the_problem(body: object, message: str) -> None:
    with pytest.raises(JobError, match=message) as err:
        parse_request(body)
    assert "\n" not in str(err.value)  # one line, for the CLI and the API alike


def test_default_worker_layout_follows_mininet_hosts() -> None:
    req = parse_request({"workers": 2, "window": 4})
    w = req.worker_specs()
    assert [(x.port, x.ip, x.mac) for x in w] == [
        (1, "10.0.0.1", "00:00:00:00:00:01"),
        (2, "10.0.0.2", "00:00:00:00:00:02"),
    ]
    assert req.aggregation_address() == ("10.0.0.3", "00:00:00:00:00:03")


def test_a_kind_name_cannot_be_taken_by_another_kind() -> None:
    from controller.jobs.job_kinds import kind_of, register

    class Impostor(NetReduce):
        pass

    with pytest.raises(ValueError, match="already NetReduce"):
        register(Impostor())
    assert type(kind_of("netreduce")) is NetReduce
    assert register(NetReduce()).name == "netreduce"  # the same kind again: harmless
