"""A switch's gRPC port is chosen free, but Linux may hand it to an outgoing connection as an
ephemeral port before the switch binds it (the tutorials' 50051.. lie in the ephemeral
range): the switch then starts on the next free port instead of failing the experiment, as
``make test`` once failed ("Failed to bind to address 0.0.0.0:50072")."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

pytestmark = [pytest.mark.mininet, pytest.mark.timeout(300)]
RUN_DIR = Path("run/switch-port-test")


def test_a_switch_whose_port_is_taken_before_it_binds_starts_on_the_next_free_one():
    from topologies.experiment import Experiment, ExperimentConfig, star
    from topologies.p4switch import P4Switch, _port_in_use

    while _port_in_use(P4Switch.next_grpc_port):
        P4Switch.next_grpc_port += 1
    taken = P4Switch.next_grpc_port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as thief:
        thief.bind(("0.0.0.0", taken))  # bound, not listening: a connect to it fails
        cfg = ExperimentConfig(star(2), run_dir=RUN_DIR, log=lambda s: None)
        with Experiment(cfg) as ex:
            sw = ex.switch("s1")
            assert sw.grpc_port > taken and _port_in_use(sw.grpc_port)
            assert sw.proc is not None and sw.proc.poll() is None
            assert "failed to bind" not in sw.log_tail().lower()  # the log of the last start
