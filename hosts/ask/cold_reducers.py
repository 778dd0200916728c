"""The cold keys' reducers: one per mapper, on its host, each owning the keys that hash to
it, so that the long tail that bypasses the switch is reduced on every mapper's host at
once instead of converging on the job's one reducer (its link, its process).

Example (mapper ``w`` of a job whose mappers are at ``ips``; every mapper does the same)::

    with ColdReducers(w, ips) as cold:
        cold.keyed(key)                 # the job's control key (None: a job without one)
        for table in partial_sums:      # Arrow tables k, s, c (a key's sum, its rows)
            hot, rest = split_hot_cold(table, budget, threshold)
            cold.route(rest)            # each key to its owner's reducer
            ...                         # hot keys through the switch
        cold.finish()                   # this mapper's input is over
        mine = cold.gathered()          # the keys this mapper owns, summed over every mapper

Which reducer owns a key: ``owners(keys, n)``, a hash of the key (integers mixed in numpy,
other keys by CRC-32 of their JSON), the same on every host, so a key has exactly one
owner and the owners' results are disjoint. A key may be hot at one mapper and cold at
another; the switch's total and its owner's then add up to its exact total.

The wire (TCP, owner ``o`` listens on ``control.COLD_PORT + o``): the owner opens with 16
random bytes (a nonce); the sender names itself (4 bytes, its mapper index) and sends
frames, each an 8-byte length and an Arrow IPC stream of one table; a frame of length 0
ends it, followed by HMAC-SHA256 under the job's control key over the nonce, the sender
and every frame (32 zero bytes on a job without a key). An owner takes a sender's tables
only from the address the job declares for that mapper, once, and only once its MAC
verifies; anything else closes the connection and is counted (``stats["refused"]``).
No row is a Python object on the way: tables are split by owner, written, read and summed
in Arrow.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import queue
import secrets
import socket
import struct
import threading
import time
import zlib
from typing import Any

import numpy as np

from hosts.ask import control

NONCE = 16
MAC = hashlib.sha256().digest_size
MAX_FRAME = 1 << 31  # bytes one table's frame may take
_END, _ABORT = -1, -2  # the sender thread's queue: this mapper's input is over; stop


def owners(keys: Any, n: int) -> np.ndarray:
    """The reducer (0..n-1) that owns each key of an Arrow array: integers hashed in numpy
    (Fibonacci hashing of their 64-bit two's complement: int32 and int64 agree), other keys
    by CRC-32 of their JSON.

    >>> import pyarrow as pa
    >>> owners(pa.array([1, 2, 3, 1]), 4).tolist()
    [1, 2, 0, 1]
    >>> owners(pa.array([-7], pa.int32()), 3) == owners(pa.array([-7], pa.int64()), 3)
    array([ True])
    """
    import pyarrow as pa

    if pa.types.is_integer(keys.type) and keys.null_count == 0:
        k = np.asarray(keys.to_numpy()).astype(np.int64).view(np.uint64)
        mixed = (k * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(32)
        return (mixed % np.uint64(n)).astype(np.int64)
    crc = (zlib.crc32(json.dumps(x).encode()) % n for x in keys.to_pylist())
    return np.fromiter(crc, dtype=np.int64, count=len(keys))


def split_hot_cold(table: Any, budget: int, threshold: int, by: str = "c") -> tuple[Any, Any]:
    """A table of partial sums split in two: its hot keys (``by`` at least ``threshold``,
    at most ``budget`` of them, the largest ``by``) and the rest, the cold ones.

    >>> import pyarrow as pa
    >>> t = pa.table({"k": [1, 2, 3, 4], "c": [9, 1, 5, 7]})
    >>> [x.column("k").to_pylist() for x in split_hot_cold(t, 2, 2)]
    [[1, 4], [2, 3]]
    """
    c = np.abs(table.column(by).to_numpy())
    hot = c >= threshold
    if hot.sum() > budget:
        at = np.flatnonzero(hot)
        hot[at[np.argpartition(-c[at], budget)[budget:]]] = False
    return table.filter(hot), table.filter(~hot)


def merged(tables: list[Any], key: str = "k") -> Any:
    """Tables of one schema, every other column summed per ``key`` (each key once)."""
    import pyarrow as pa

    t = pa.concat_tables(tables)
    values = [c for c in t.column_names if c != key]
    agg = t.group_by(key).aggregate([(c, "sum") for c in values])
    return pa.table({key: agg.column(key), **{c: agg.column(f"{c}_sum") for c in values}})


def ipc_bytes(table: Any, compression: str | None = "zstd") -> bytes:
    """A table as an Arrow IPC stream, its buffers compressed (zstd: a cold keys' table of
    int64 columns to about a quarter, in a few milliseconds per 100,000 rows)."""
    import pyarrow as pa

    sink = pa.BufferOutputStream()
    options = pa.ipc.IpcWriteOptions(compression=compression)
    with pa.ipc.new_stream(sink, table.schema, options=options) as w:
        w.write_table(table)
    return bytes(sink.getvalue())


def ipc_table(data: Any) -> Any:
    """The table of ``ipc_bytes``."""
    import pyarrow as pa

    return pa.ipc.open_stream(pa.py_buffer(data)).read_all()


def _read_exactly(sock: socket.socket, n: int) -> bytearray:
    buf = bytearray(n)
    view, got = memoryview(buf), 0
    while got < n:
        k = sock.recv_into(view[got:], n - got)
        if k == 0:
            raise ConnectionError("the peer closed the cold keys' connection")
        got += k
    return buf


class ColdReducers:
    """Mapper ``me``'s ends of the cold keys' exchange (module doc): its reducer (listening
    from the start, a thread per sender) and its connections to the other mappers'."""

    def __init__(self, me: int, ips: list[str], timeout: float = 300.0) -> None:
        if not 0 <= me < len(ips):
            raise ValueError(f"mapper {me} of {len(ips)}")
        self.me, self.ips, self.n, self.timeout = me, ips, len(ips), timeout
        self.key: bytes | None = None
        self._keyed = threading.Event()
        self._lock = threading.Lock()
        self._got: dict[int, list[Any]] = {}  # sender -> its verified tables
        self._own: list[Any] = []  # this mapper's keys that it owns itself
        self._all_in = threading.Event()
        self.stats: dict[str, Any] = {"keys_out": 0, "bytes_out": 0, "keys_in": 0,
                                      "bytes_in": 0, "refused": 0}  # fmt: skip
        self._error: list[BaseException] = []
        self._finished = False
        port = control.COLD_PORT + me
        try:
            self._lst = socket.create_server(("0.0.0.0", port))
        except OSError as e:
            raise OSError(e.errno, f"cold reducer of mapper {me}: TCP port {port} on this host:"
                          f" {e.strerror} (another job's mapper {me} here?)") from None  # fmt: skip
        self._socks: list[socket.socket] = [self._lst]
        self._out: queue.Queue[tuple[int, bytes]] = queue.Queue()
        self._threads = [threading.Thread(target=self._serve, daemon=True),
                         threading.Thread(target=self._send, daemon=True)]  # fmt: skip
        if self.n == 1:
            self._all_in.set()
        for t in self._threads:
            t.start()

    def __enter__(self) -> ColdReducers:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def keyed(self, key: bytes | None) -> None:
        """The job's control key (None: the job has none): frames are sealed and checked
        with it."""
        self.key = key
        self._keyed.set()

    # -- sending ------------------------------------------------------------------------

    def route(self, table: Any) -> None:
        """A table's rows (column ``k`` the key) each to its owner's reducer: this mapper's
        own kept here, the others' queued for the sender thread."""
        if table.num_rows == 0:
            return
        own = owners(table.column("k"), self.n)
        order = np.argsort(own, kind="stable")
        counts = np.bincount(own, minlength=self.n)
        table = table.take(order)
        at = 0
        for o, k in enumerate(counts.tolist()):
            if k:
                part = table.slice(at, k)
                if o == self.me:
                    self._own.append(part)
                else:
                    data = ipc_bytes(part)
                    self.stats["keys_out"] += k
                    self.stats["bytes_out"] += len(data)
                    self._out.put((o, data))
            at += k

    def finish(self) -> None:
        """This mapper's input is over: every other reducer is told so (its MAC sent)."""
        self._finished = True
        self._out.put((_END, b""))

    def _send(self) -> None:
        conns: dict[int, tuple[socket.socket, Any]] = {}
        try:
            while True:
                o, data = self._out.get()
                if o == _ABORT:
                    return
                if o == _END:
                    break
                sock, mac = conns.get(o) or self._connect(o, conns)
                head = struct.pack("!Q", len(data))
                sock.sendall(head)
                sock.sendall(data)
                mac.update(head)
                mac.update(data)
            for o in range(self.n):
                if o != self.me:
                    sock, mac = conns.get(o) or self._connect(o, conns)
                    end = struct.pack("!Q", 0)
                    mac.update(end)
                    sock.sendall(end + (mac.digest() if self.key is not None else bytes(MAC)))
        except BaseException as e:  # noqa: BLE001 - raised again by gathered()
            self._error.append(e)
        finally:
            for sock, _ in conns.values():
                sock.close()

    def _connect(self, o: int, conns: dict[int, tuple[socket.socket, Any]]) -> tuple[Any, Any]:
        """A connection to reducer ``o`` (retried while it is not up yet) and its MAC."""
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                sock = socket.create_connection((self.ips[o], control.COLD_PORT + o), timeout=30)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        sock.settimeout(self.timeout)
        self._socks.append(sock)
        nonce = bytes(_read_exactly(sock, NONCE))
        if not self._keyed.wait(self.timeout):
            raise TimeoutError("cold keys: no control key set (ColdReducers.keyed)")
        me = struct.pack("!I", self.me)
        mac = hmac.new(self.key or b"", nonce + me, hashlib.sha256)
        sock.sendall(me)
        conns[o] = (sock, mac)
        return conns[o]

    # -- reducing -----------------------------------------------------------------------

    def _serve(self) -> None:
        while not self._all_in.is_set():
            try:
                conn, addr = self._lst.accept()
            except OSError:
                return  # closed
            self._socks.append(conn)
            threading.Thread(target=self._take, args=(conn, addr[0]), daemon=True).start()

    def _take(self, conn: socket.socket, ip: str) -> None:
        """One sender's tables, kept once its MAC verifies (module doc)."""
        import pyarrow as pa

        try:
            conn.settimeout(self.timeout)
            nonce = secrets.token_bytes(NONCE)
            conn.sendall(nonce)
            head = bytes(_read_exactly(conn, 4))
            (w,) = struct.unpack("!I", head)
            if w >= self.n or w == self.me or self.ips[w] != ip:
                raise ConnectionError(f"mapper {w} is not a mapper of the job at {ip}")
            frames, size, blobs = [], 0, [nonce + head]
            while True:
                raw = bytes(_read_exactly(conn, 8))
                (length,) = struct.unpack("!Q", raw)
                blobs.append(raw)
                if length == 0:
                    break
                if length > MAX_FRAME:
                    raise ConnectionError(f"a cold keys' frame of {length} bytes")
                data = _read_exactly(conn, length)
                blobs.append(data)
                frames.append(data)
                size += length
            mac = bytes(_read_exactly(conn, MAC))
            if not self._keyed.wait(self.timeout):
                raise TimeoutError("cold keys: no control key set (ColdReducers.keyed)")
            if self.key is not None:
                want = hmac.new(self.key, b"".join(blobs), hashlib.sha256).digest()
                if not hmac.compare_digest(mac, want):
                    raise ConnectionError(f"cold keys from mapper {w}: the MAC does not verify")
            tables = [ipc_table(f) for f in frames]
            with self._lock:
                if w in self._got:
                    raise ConnectionError(f"cold keys from mapper {w} twice")
                self._got[w] = tables
                self.stats["keys_in"] += sum(t.num_rows for t in tables)
                self.stats["bytes_in"] += size
                if len(self._got) == self.n - 1:
                    self._all_in.set()
        except (OSError, ConnectionError, ValueError, pa.ArrowException):
            with self._lock:
                self.stats["refused"] += 1
        finally:
            conn.close()

    def gathered(self) -> Any:
        """Once every other mapper has finished: the keys this mapper owns, every column
        but ``k`` summed over all mappers' tables (an Arrow table, each key once), or None
        when no mapper had any. ``finish`` first."""
        if not self._finished:
            raise RuntimeError("ColdReducers.gathered before finish: the others would wait")
        t0 = time.perf_counter()
        while not self._all_in.wait(0.05):
            if self._error:
                raise self._error[0]
            if time.perf_counter() - t0 > self.timeout:
                with self._lock:
                    missing = sorted(set(range(self.n)) - {self.me, *self._got})
                raise TimeoutError(f"cold reducer {self.me}: nothing complete from mappers"
                                   f" {missing} in {self.timeout:g} s")  # fmt: skip
        self.stats["wait_s"] = time.perf_counter() - t0
        for t in self._threads[1:]:
            t.join(self.timeout)  # this mapper's own frames are out too
        if self._error:
            raise self._error[0]
        tables = [t for ts in self._got.values() for t in ts] + self._own
        tables = [t for t in tables if t.num_rows]
        t1 = time.perf_counter()
        out = merged(tables) if tables else None
        self.stats["merge_s"] = time.perf_counter() - t1
        self.stats["keys"] = out.num_rows if out is not None else 0
        return out

    def close(self) -> None:
        self._all_in.set()
        self._out.put((_ABORT, b""))  # after finish()'s end, if any: that one is sent first
        try:  # wakes the thread blocked in accept(), which close() alone does not
            self._lst.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        for s in self._socks:
            s.close()
