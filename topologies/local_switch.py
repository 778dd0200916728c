"""A p4sim switch served over P4Runtime inside this process (tests, demos without Mininet).

Example::

    files = compile_pipeline("p4src/inc.p4", "build/")        # P4Info + device config
    with LocalSwitch(device_id=0) as sw:                        # gRPC on 127.0.0.1:<free>
        ... any P4Runtime client connects to sw.address and pushes files ...
        outputs = sw.send(port=1, frame=b"...")                 # [(egress port, bytes)]

The controller still reaches the switch only through gRPC; ``send`` stands in for a packet
arriving on a port (what p4sim's AF_PACKET port loop does on real interfaces).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

P4SRC = Path(__file__).resolve().parent.parent / "p4src" / "inc.p4"


@dataclass(frozen=True)
class PipelineFiles:
    p4info: Path
    device_config: Path


def compile_pipeline(p4_file: str | Path, out_dir: str | Path) -> PipelineFiles:
    """Compile with p4sim and write ``NAME.p4info.txtpb`` and ``NAME.p4sim`` in out_dir."""
    from p4sim.p4info import build_p4info, bundle_sources, write_device_config, write_p4info
    from p4sim.p4runtime.target import program_info_of
    from p4sim.switch import Switch

    src, out = Path(p4_file), Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    files = PipelineFiles(out / f"{src.stem}.p4info.txtpb", out / f"{src.stem}.p4sim")
    switch = Switch.from_file(str(src))
    write_p4info(build_p4info(program_info_of(switch)), files.p4info)
    write_device_config(bundle_sources(str(src)), files.device_config)
    return files


class LocalSwitch:
    """p4sim's P4Runtime server on localhost (``port`` 0: a free one); no pipeline until a
    client sets one."""

    def __init__(self, device_id: int = 0, cpu_port: int | None = None, port: int = 0) -> None:
        from p4sim.p4runtime import P4RuntimeServer

        self.device_id = device_id
        address = f"127.0.0.1:{port}"
        self.server = P4RuntimeServer(device_id=device_id, address=address, cpu_port=cpu_port)
        self.port = port

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> LocalSwitch:
        self.port = self.server.start()
        return self

    def stop(self) -> None:
        self.server.stop()

    def __enter__(self) -> LocalSwitch:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def send(self, port: int, frame: bytes) -> list[tuple[int, bytes]]:
        """Run one frame arriving on ``port`` through the switch; the frames it sends out."""
        return self.server.inject(port, frame)
