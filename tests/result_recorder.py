"""Records every aggregation result that reaches a host (run inside a Mininet host by tests):
one JSON line per result, ``[psn, epoch, bitmap, crc32 of the values]``, duplicates and
late copies included, so a test can check that all copies of a round's result agree.

    python -m tests.result_recorder --iface h1-eth0 --job 1 --out run/h1.results

Runs until SIGTERM (or ``--seconds``); a raw packet socket on ``--iface`` sees the frames
the host receives, whatever the worker's socket does with them.
"""

from __future__ import annotations

import argparse
import json
import signal
import socket
import sys
import time
import zlib
from types import FrameType

from wire.header import Flag, ProtocolError, unpack

ETH_P_ALL = 0x0003


def udp_payload(frame: bytes) -> bytes | None:
    """The UDP payload of an IPv4 frame (any port: a worker's results come to its own)."""
    if len(frame) < 42 or frame[12:14] != b"\x08\x00" or frame[23] != socket.IPPROTO_UDP:
        return None
    return frame[14 + (frame[14] & 0x0F) * 4 + 8 :]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.result_recorder")
    ap.add_argument("--iface", required=True)
    ap.add_argument("--job", type=int, required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--seconds", type=float, default=600.0)
    a = ap.parse_args(argv)
    stop = {"now": False}

    def on_term(signum: int, frame: FrameType | None) -> None:
        stop["now"] = True

    signal.signal(signal.SIGTERM, on_term)
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    sock.bind((a.iface, 0))
    sock.settimeout(0.1)
    end = time.monotonic() + a.seconds
    print("recording", flush=True)
    with open(a.out, "w") as out:
        while not stop["now"] and time.monotonic() < end:
            try:
                frame, addr = sock.recvfrom(65536)
            except TimeoutError:
                continue
            if addr[2] == socket.PACKET_OUTGOING:
                continue
            payload = udp_payload(frame)
            if payload is None:
                continue
            try:
                h, values = unpack(payload)
            except ProtocolError:
                continue
            if h.job_id != a.job or not h.flags & Flag.RESULT or h.flags & Flag.WAIT:
                continue
            crc = zlib.crc32(values.tobytes())
            out.write(json.dumps([h.psn, h.epoch, h.bitmap, crc]) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
