"""`make run`: the main job, in-network aggregation (topologies/netreduce.py).

Example::

    python -m topologies.demo                 # NetReduce: switch vs parameter server vs ring
    python -m topologies.demo --epochs 3      # options of `python -m topologies.netreduce run`
    python -m topologies.demo --basic         # the basic ping demo

``--basic`` keeps the first demo: two Mininet hosts on veth links pinging each other
through one switch running the IPv4 forwarding program ``topologies/basic/basic.p4``, with
the switch's table entries from ``topologies/basic/s1-runtime.json``. The switch is p4sim,
or BMv2 with SWITCH=bmv2.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from topologies import runner

HERE = Path(__file__).resolve().parent
EXERCISE = HERE / "basic"


def compile_for_bmv2(source: Path) -> Path | None:
    """BMv2 runs p4c's JSON output: compile ``source`` into build/ with the real p4c."""
    if shutil.which("p4c") is None:
        print("make run: SWITCH=bmv2 needs p4c and simple_switch_grpc on PATH (see docker/)")
        return None
    out = Path("build")
    out.mkdir(exist_ok=True)
    cmd = [
        "p4c",
        "--target",
        "bmv2",
        "--arch",
        "v1model",
        "-o",
        str(out),
        "--p4runtime-files",
        str(out / f"{source.stem}.p4info.txtpb"),
        str(source),
    ]
    print("make run: $ " + " ".join(cmd))
    if subprocess.run(cmd, check=False).returncode != 0:
        return None
    return out / f"{source.stem}.json"


def basic() -> int:
    """The ping demo on topologies/basic (``--basic``)."""
    kind = os.environ.get("SWITCH", "p4sim")
    program: Path | None = EXERCISE / "basic.p4"
    if kind == "bmv2":
        program = compile_for_bmv2(EXERCISE / "basic.p4")
    if program is None:
        return 1
    shown = program.relative_to(Path.cwd()) if program.is_relative_to(Path.cwd()) else program
    print(f"make run: switch s1 = {kind} running {shown}")
    print(
        "make run: hosts h1 (10.0.1.1) and h2 (10.0.2.2) on veth links to s1 ports 1 and 2;"
        " table entries from topologies/basic/s1-runtime.json; every pair pings 3 times"
    )
    return runner.main([str(EXERCISE / "topology.json"), "--program", str(program), "--ping-all"])


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if "--basic" in argv:
        return basic()
    from topologies import netreduce

    return netreduce.main(["run", *argv])


if __name__ == "__main__":
    sys.exit(main())
