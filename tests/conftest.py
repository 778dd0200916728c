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
    for item in items:
        # make test: -n auto --dist loadgroup. One xdist worker runs everything that touches
        # the host's network (interface and namespace names, Mininet's switch ports) in
        # turn; the in-process tests run beside it, each file whole and in order in one
        # worker (some share a module-scoped switch whose state one test leaves to the next)
        network = item.get_closest_marker("root") or item.get_closest_marker("mininet")
        if item.get_closest_marker("own_network"):  # names and ports of its own: beside them
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
