"""Client of the controller daemon's HTTP/JSON API (``incctl`` and worker agents use it).

Example::

    api = ControllerApi("http://127.0.0.1:7070")
    job = api.submit({"workers": 4, "window": 64})
    cfg = api.worker_config(job["job_id"], 0)    # region_offset, region_size, window, ...
    api.cancel(job["job_id"])

Stdlib only (http.client), so a worker host needs nothing more to ask for its
configuration. ``unix:PATH`` reaches a daemon started with ``--unix PATH`` (a Mininet host
has its own network namespace, so the root namespace's 127.0.0.1 is out of its reach, but
it shares the filesystem)::

    api = ControllerApi("unix:run/netreduce/controller.sock")
"""

from __future__ import annotations

import http.client
import json
import socket
import urllib.parse
from typing import Any

DEFAULT_URL = "http://127.0.0.1:7070"
UNIX_PREFIX = "unix:"


class ApiError(Exception):
    """The daemon refused the request (``status`` is its HTTP status) or cannot be reached
    (``status`` 0); the message is meant for the user."""

    def __init__(self, message: str, status: int = 0) -> None:
        super().__init__(message)
        self.status = status


class ControllerApi:
    """``url``: ``http://HOST:PORT`` or ``unix:PATH``; a malformed one raises ``ApiError``."""

    def __init__(self, url: str = DEFAULT_URL, timeout: float = 150.0) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout
        if not self.url.startswith(UNIX_PREFIX):
            _check_http_url(self.url)

    def _call(self, method: str, path: str, body: Any = None, timeout: float | None = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        wait = self.timeout if timeout is None else timeout
        if self.url.startswith(UNIX_PREFIX):
            conn: http.client.HTTPConnection = _UnixConnection(self.url[len(UNIX_PREFIX) :], wait)
        else:
            parts = urllib.parse.urlsplit(self.url)
            cls = (
                http.client.HTTPSConnection
                if parts.scheme == "https"
                else http.client.HTTPConnection
            )
            conn = cls(parts.netloc, timeout=wait)
            path = parts.path + path
        try:
            conn.request(method, path, body=data, headers={"Content-Type": "application/json"})
            resp = conn.getresponse()
            raw = resp.read()
        except (FileNotFoundError, ConnectionRefusedError, socket.gaierror) as err:
            raise ApiError(
                f"cannot reach the controller at {self.url}: {err.strerror or err}"
                " (is `python -m controller.daemon` running?)"
            ) from None
        except (TimeoutError, OSError, http.client.HTTPException, ValueError) as err:
            what = type(err).__name__ if not str(err) else str(err).splitlines()[0]
            raise ApiError(f"controller at {self.url} did not answer in HTTP: {what}") from None
        finally:
            conn.close()
        if resp.status >= 400:
            try:
                message = str(json.loads(raw)["error"])
            except (ValueError, KeyError, TypeError):
                message = f"HTTP {resp.status} {resp.reason}"
            raise ApiError(message, resp.status)
        if not raw:
            return {}
        try:
            return json.loads(raw)
        except ValueError:
            raise ApiError(
                f"controller at {self.url} answered something that is not JSON"
            ) from None

    def submit(self, request: dict[str, Any]) -> dict[str, Any]:
        return self._call("POST", "/jobs", request)["job"]

    def jobs(self) -> list[dict[str, Any]]:
        return self._call("GET", "/jobs")["jobs"]

    def job(self, job_id: int) -> dict[str, Any]:
        return self._call("GET", f"/jobs/{job_id}")["job"]

    def cancel(self, job_id: int) -> dict[str, Any]:
        return self._call("DELETE", f"/jobs/{job_id}")["job"]

    def set_mode(self, job_id: int, mode: str) -> dict[str, Any]:
        """Change a serene job's synchronisation mode (``incctl job mode``)."""
        return self._call("POST", f"/jobs/{job_id}/mode", {"mode": mode})

    def sync_state(self, job_id: int) -> dict[str, Any]:
        """A serene job's mode and epoch clocks as the switch holds them."""
        return self._call("GET", f"/jobs/{job_id}/sync")

    def worker_config(self, job_id: int, worker_id: int) -> dict[str, Any]:
        return self._call("GET", f"/jobs/{job_id}/workers/{worker_id}")

    def memory(self) -> list[dict[str, Any]]:
        return self._call("GET", "/memory")["switches"]

    def switches(self) -> list[dict[str, Any]]:
        return self._call("GET", "/switches")["switches"]

    def report_progress(
        self,
        job_id: int,
        worker_id: int,
        counters: dict[str, int] | None = None,
        gauges: dict[str, float] | None = None,
        state: dict[str, str] | None = None,
        timeout: float = 2.0,
    ) -> None:
        """Tell the daemon how far this worker got (shown on the dashboard and /metrics)."""
        body = {"counters": counters or {}, "gauges": gauges or {}, "state": state or {}}
        self._call("POST", f"/jobs/{job_id}/workers/{worker_id}/progress", body, timeout)

    def epoch(
        self,
        job_id: int,
        worker_id: int,
        epoch: int,
        rtt_s: float | None = None,
        wait: float = 0.0,
    ) -> dict[str, Any]:
        """Scheduled job: the region of ``epoch`` (``epoch == epochs``: done). The daemon
        holds the request up to ``wait`` seconds while the answer would be "wait"."""
        body: dict[str, Any] = {"epoch": epoch, "wait": wait}
        if rtt_s is not None:
            body["rtt_s"] = rtt_s
        return self._call("POST", f"/jobs/{job_id}/workers/{worker_id}/epoch", body)

    def schedule(self) -> dict[str, Any]:
        return self._call("GET", "/schedule")


def _check_http_url(url: str) -> None:
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port  # raises ValueError when it is not a number
    except ValueError as err:
        raise ApiError(f"bad controller URL {url!r}: {err}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ApiError(
            f"bad controller URL {url!r}: expected http://HOST:PORT or unix:PATH"
        ) from None
    del port


class _UnixConnection(http.client.HTTPConnection):
    """HTTP over a Unix domain socket (``unix:PATH`` URLs)."""

    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self.unix_path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(self.unix_path)
        except OSError:
            sock.close()
            raise
        self.sock = sock
