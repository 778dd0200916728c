"""Shared test configuration.

Tests marked ``root`` or ``mininet`` need root (network namespaces, veth links, raw
sockets), and run one after another in one xdist worker; every other test file runs whole in
one worker. CI runs as root, so there they always run; on a developer's machine without root
they are skipped with that reason. In CI (CI=true) a missing root is an error, never a
skip."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from topologies.local_switch import P4SRC, LocalSwitch, PipelineFiles, compile_pipeline


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    own_netns = os.environ.get("INC_NETNS_PID") == str(os.getpid())
    for item in items:
        # make test: every xdist worker starts in a network namespace of its own
        # (scripts/netns.sh), so Mininet's fixed names (s1, s1-ethN, the switches' gRPC and
        # API ports, nftables tables) cannot collide between workers: each file runs whole
        # and in order in one worker (some share a module-scoped switch whose state one
        # test leaves to the next, a Mininet file its run/ folder). Workers that share the
        # host's namespace (plain `pytest -n 2`) run everything that touches the network in
        # one worker, in turn.
        network = item.get_closest_marker("root") or item.get_closest_marker("mininet")
        if own_netns or item.get_closest_marker("own_network"):  # names and ports of its own
            network = None
        item.add_marker(pytest.mark.xdist_group("network" if network else item.path.name))
    if os.geteuid() == 0:
        return
    for item in items:
        if item.get_closest_marker("root") or item.get_closest_marker("mininet"):
            if os.environ.get("CI"):
                item.add_marker(pytest.mark.usefixtures("_fail_without_root"))
            else:
                item.add_marker(pytest.mark.skip(reason="needs root (run as root, as CI does)"))


@pytest.fixture
def _fail_without_root() -> None:
    pytest.fail("this test needs root; CI must run as root")


# The shipped program compiled once per session, and a fresh in-process p4sim switch per
# test: what the controller, daemon and library tests program over P4Runtime.
@pytest.fixture(scope="session")
def files(tmp_path_factory: pytest.TempPathFactory) -> PipelineFiles:
    return compile_pipeline(P4SRC, tmp_path_factory.mktemp("pipeline"))


@pytest.fixture
def switch() -> Iterator[LocalSwitch]:
    with LocalSwitch(device_id=0) as sw:
        yield sw
