"""ASK's control channel: JSON lines over TCP between the reducer, its mappers and collectors.

Example (a driver waiting for a running job's record while its mappers run)::

    watch = RecordWatch("10.0.0.3")      # subscribed before any mapper starts
    ...                                  # the mappers: hosts/ask/mapper_process.py
    record = watch.record()              # {"result": {key: total}, "seconds": ..., ...}

Data: AGG_KV packets over UDP port ``INC_UDP_PORT`` through the switch (``MapperFlow``,
``Reducer``). Control: one TCP connection per mapper to the reducer (port
``CONTROL_PORT``), JSON lines: the reducer moves the mappers to a new epoch every
``--swap-s`` seconds (``{"epoch": e}`` / ``{"moved": e}``) and drains the copy they left;
a mapper whose tuples are all acknowledged sends its vocabulary (``{"done": ..., "fps":
[...], "keys": [...]}``, each key under its fingerprint) and its cold keys' exact sums
(``"cold"``: keys that bypass the switch travel here, by key, as two columns, keys and
values, not as FALLBACK packets the reducer would take one by one); when all are done the
reducer
drains the last epoch, asks for the exact sums of colliding fingerprints, if any
(``{"counts_for": [...]}``), writes the result (key -> total; columns too) as JSON and
says ``{"bye": true}``. A collector (``collect``: the Spark driver) says ``{"collect": true}``,
is answered ``{"collecting": true}`` and gets ``{"record": ...}`` at the end.

Who is who: a mapper says ``{"hello": w, "port": p}`` (``p``: the UDP port it sends from)
and waits for ``{"welcome": w}`` before sending; the reducer welcomes only a connection
from the IP the job declares for mapper ``w`` (the controller's plan), once, and then takes
``w``'s packets only from that IP and port (``Reducer.bind_flow``), and ``moved``, ``done``
and ``counts`` only over ``w``'s connection (once each mapper for ``counts``). Anything else
is refused (``{"refused": why}``) and the connection closed; a connection that closes, sends
a line that is not a JSON object or more than ``MAX_LINE`` bytes without a newline is
dropped, and the reducer goes on. With a token that gets the job's control key from the daemon
(``ControllerApi.control_key``: the job's or the operator's, ``$INC_TOKEN`` or the token
files the daemon writes) every line between a mapper and the reducer is signed with that
key (``hosts/transport/control_auth.py``): the reducer
opens each connection with ``{"nonce": ...}``, and a line that is not signed with the key,
replayed, reordered or reflected closes its connection; a host that is not the job's cannot
speak for a mapper even from the mapper's own address. A collector only reads (its
``collect`` and what it is sent are not signed). Keys are
any ASK key (str, bytes, int, tuples of them): they cross every connection, and the
result file, in ``hosts/ask/keys.py``'s form, and come back as they were sent.
"""

from __future__ import annotations

import json
import socket
import threading
from pathlib import Path
from typing import Any

from controller.api_client import ApiError
from hosts.ask.keys import decode_counts
from hosts.transport.control_auth import ChannelAuth
from wire.header import INC_UDP_PORT

# the ports of every ASK process (the data's UDP port, the control channel's TCP port), read
# here at each use: a test over the loopback sets both here
CONTROL_PORT = INC_UDP_PORT + 1
# the cold reducers' TCP ports (hosts/ask/cold_reducers.py): mapper w's on COLD_PORT + w
COLD_PORT = INC_UDP_PORT + 32
MAX_LINE = 256 << 20  # bytes a control message may take (a vocabulary of a few million keys)


class Lines:
    """JSON lines over a TCP socket (non-blocking reads); ``ConnectionError`` when the peer
    closed, or sent what is not a JSON object per line within ``MAX_LINE`` bytes. With
    ``auth``, lines are signed and must verify, except a message in ``unsigned``."""

    def __init__(self, sock: socket.socket, auth: ChannelAuth | None = None) -> None:
        self.sock = sock
        self.buf = b""
        self._parts: list[bytes] = []  # a line's pieces received after ``buf``, no newline yet
        self._pending = 0  # their bytes
        self.auth = auth
        self.unsigned: frozenset[str] = frozenset()  # keys a message may come unsigned with

    def send(self, msg: dict[str, Any], signed: bool = True) -> None:
        if self.auth is not None and signed:
            msg = self.auth.seal(msg)
        self.sock.sendall(json.dumps(msg).encode() + b"\n")

    def read(self) -> list[dict[str, Any]]:
        data = self.sock.recv(1 << 20)
        if not data:
            raise ConnectionError("the peer closed the control connection")
        # a long line (a vocabulary, cold keys, a record: megabytes) comes in many pieces of
        # what the link delivered; they are joined once its newline is in, not at each piece
        # (which copies and scans the line so far every time: quadratic in its length)
        self._pending += len(data)
        if b"\n" not in data:
            if self._pending + len(self.buf) > MAX_LINE:
                raise ConnectionError(f"a control message over {MAX_LINE} bytes")
            self._parts.append(data)
            return []
        *lines, self.buf = b"".join([self.buf, *self._parts, data]).split(b"\n")
        self._parts, self._pending = [], 0
        if len(self.buf) > MAX_LINE:
            raise ConnectionError(f"a control message over {MAX_LINE} bytes")
        try:
            msgs = [json.loads(x) for x in lines if x]
        except ValueError as e:
            raise ConnectionError(f"a control line that is not JSON: {e}") from None
        if not all(isinstance(m, dict) for m in msgs):
            raise ConnectionError("a control line that is not a JSON object")
        auth = self.auth
        if auth is None:
            return msgs
        return [m if m.keys() <= self.unsigned else auth.open(m) for m in msgs]


def control_key(api: Any, job_id: int) -> bytes | None:
    """The job's control-channel key (None: this host holds no token that gets it)."""
    try:
        return bytes(api.control_key(job_id))
    except ApiError:
        return None


def subscribe(reducer_ip: str) -> Lines:
    """Tell the reducer to send its record of the job here; returns once it has said so."""
    ctl = Lines(socket.create_connection((reducer_ip, CONTROL_PORT), timeout=30.0))
    try:
        ctl.send({"collect": True})
        while True:
            if any("collecting" in msg for msg in ctl.read()):
                return ctl
    except BaseException:
        ctl.sock.close()
        raise


def wait_record(ctl: Lines, timeout: float = 600.0) -> dict[str, Any]:
    """The record of a ``subscribe``d reducer (``result``: key -> total, figures)."""
    try:
        ctl.sock.settimeout(timeout)
        while True:
            for msg in ctl.read():
                if "record" in msg:
                    return _decoded(msg["record"])
    finally:
        ctl.sock.close()


class RecordWatch:
    """A driver's wait for the reducer's record, in a thread of its own while the job runs:
    ``RecordWatch(ip)`` subscribes (the reducer knows the driver before any mapper starts),
    ``record()`` joins and returns it (or raises what the wait met), ``cancel()`` (the job
    failed) closes the connection so that the wait gives up too."""

    def __init__(self, reducer_ip: str) -> None:
        self._ctl = subscribe(reducer_ip)
        self._record: dict[str, Any] = {}
        self._errors: list[BaseException] = []
        self._thread = threading.Thread(target=self._wait, daemon=True)
        self._thread.start()

    def _wait(self) -> None:
        try:
            self._record.update(wait_record(self._ctl))
        except (OSError, ValueError) as e:
            self._errors.append(e)

    def cancel(self) -> None:
        self._ctl.sock.close()

    def record(self) -> dict[str, Any]:
        self._thread.join()
        if self._errors:
            raise self._errors[0]
        return self._record


def read_record(path: Path) -> dict[str, Any]:
    """The record a reducer wrote with ``--out`` (``result``: key -> total, figures)."""
    return _decoded(json.loads(Path(path).read_text()))


def _decoded(record: dict[str, Any]) -> dict[str, Any]:
    return {**record, "result": decode_counts(record["result"])}


def collect(reducer_ip: str, timeout: float = 600.0) -> dict[str, Any]:
    """Wait for the reducer's record of the job (``result``: key -> total, figures)."""
    return wait_record(subscribe(reducer_ip), timeout)
