"""A P4Runtime client we did not write — p4runtime-shell, in its own venv (it pins
protobuf<3.21 and an old IPython, so it stays out of the main environment) — drives p4sim's
P4Runtime server: sets the pipeline, inserts and reads back a table entry, and that entry
forwards a packet."""

from __future__ import annotations

import subprocess
import venv
from pathlib import Path

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from p4sim.p4info import compile_outputs
from p4sim.p4runtime import P4RuntimeServer

ROOT = Path(__file__).resolve().parents[1]
SHELL_VENV = ROOT / ".cache/p4runtime-shell-venv"
PROGRAM = ROOT / "topologies/basic/basic.p4"

pytestmark = pytest.mark.slow

CLIENT = r"""
import sys
import p4runtime_sh.shell as sh
addr, p4info, devcfg = sys.argv[1:4]
sh.setup(device_id=0, grpc_addr=addr, election_id=(0, 1),
         config=sh.FwdPipeConfig(p4info, devcfg))
te = sh.TableEntry("RouterIngress.ipv4_route")(action="RouterIngress.forward")
te.match["hdr.ipv4.dst_addr"] = "10.0.2.2/32"
te.action["next_hop_mac"] = "08:00:00:00:02:22"
te.action["port"] = "2"
te.insert()
for e in sh.TableEntry("RouterIngress.ipv4_route").read():
    m = e.match["hdr.ipv4.dst_addr"]
    print("READ", m.lpm.value.hex(), m.lpm.prefix_len, e.action["port"].value.hex())
sh.teardown()
print("SHELL OK")
"""


@pytest.fixture(scope="module")
def shell_python() -> Path:
    py = SHELL_VENV / "bin/python"
    if not (SHELL_VENV / ".ready").exists():
        venv.create(SHELL_VENV, with_pip=True, clear=True)
        r = subprocess.run(
            [str(py), "-m", "pip", "install", "-q", "p4runtime-shell>=0.0.4,<0.1"],
            capture_output=True,
            text=True,
            check=False,
        )
        assert r.returncode == 0, f"installing p4runtime-shell failed:\n{r.stderr[-3000:]}"
        (SHELL_VENV / ".ready").touch()
    return py


def test_p4runtime_shell_sets_pipeline_and_its_entry_forwards(shell_python, tmp_path):
    p4info, devcfg = tmp_path / "basic.p4info.txtpb", tmp_path / "basic.p4sim"
    compile_outputs(str(PROGRAM), p4info_out=str(p4info), device_config_out=str(devcfg))
    server = P4RuntimeServer(device_id=0, address="127.0.0.1:0")
    port = server.start()
    try:
        r = subprocess.run(
            [str(shell_python), "-c", CLIENT, f"127.0.0.1:{port}", str(p4info), str(devcfg)],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert "SHELL OK" in r.stdout, r.stdout + r.stderr
        assert "READ 0a000202 32 02" in r.stdout, r.stdout
        pkt = bytes(
            Ether(dst="08:00:00:00:01:00", src="08:00:00:00:01:11")
            / IP(src="10.0.1.1", dst="10.0.2.2", ttl=64)
            / UDP()
            / b"hi"
        )
        out = server.inject(1, pkt)
    finally:
        server.stop()
    assert len(out) == 1
    egress, data = out[0]
    assert egress == 2
    fwd = Ether(data)
    assert fwd.dst == "08:00:00:00:02:22" and fwd[IP].ttl == 63
    recomputed = fwd[IP].copy()
    recomputed.chksum = None
    assert IP(bytes(recomputed)).chksum == fwd[IP].chksum  # the switch updated it
