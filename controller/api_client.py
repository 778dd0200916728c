"""Client of the controller daemon's HTTP/JSON API (``incctl`` and worker agents use it).

Example::

    api = ControllerApi("http://127.0.0.1:7070")
    job = api.submit({"workers": 4, "window": 64})
    cfg = api.worker_config(job["job_id"], 0)    # region_offset, region_size, window, ...
    api.cancel(job["job_id"])

Stdlib only (urllib, http.client), so a worker host needs nothing more to ask for its
configuration. ``unix:PATH`` reaches a daemon started with ``--unix PATH`` (a Mininet host
has its own network namespace, so the root namespace's 127.0.0.1 is out of its reach, but
it shares the filesystem)::

    api = ControllerApi("unix:run/netreduce/controller.sock")
"""

from __future__ import annotations

import http.client
import json
import socket
import urllib.error
import urllib.request
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
    def __init__(self, url: str = DEFAULT_URL, timeout: float = 150.0) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        if self.url.startswith(UNIX_PREFIX):
            return self._call_unix(method, path, data)
        req = urllib.request.Request(
            self.url + path, data=data, method=method, headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                return json.loads(resp.read() or b"{}")
        except urllib.error.HTTPError as err:
            raise ApiError(_error_text(err), err.code) from None
        except urllib.error.URLError as err:
            reason = getattr(err.reason, "strerror", None) or str(err.reason)
            raise ApiError(
                f"cannot reach the controller at {self.url}: {reason}"
                " (is `python -m controller.daemon` running?)"
            ) from None
        except (TimeoutError, ConnectionError) as err:
            raise ApiError(f"controller at {self.url}: {err}") from None

    def _call_unix(self, method: str, path: str, data: bytes | None) -> Any:
        sock_path = self.url[len(UNIX_PREFIX) :]
        conn = _UnixConnection(sock_path, self.timeout)
        try:
            conn.request(method, path, body=data, headers={"Content-Type": "application/json"})
            resp = conn.getresponse()
            raw = resp.read()
        except (FileNotFoundError, ConnectionRefusedError) as err:
            raise ApiError(
                f"cannot reach the controller at {self.url}: {err.strerror}"
                " (is `python -m controller.daemon --unix PATH` running?)"
            ) from None
        except (TimeoutError, OSError, http.client.HTTPException) as err:
            raise ApiError(f"controller at {self.url}: {err}") from None
        finally:
            conn.close()
        if resp.status >= 400:
            try:
                message = str(json.loads(raw)["error"])
            except (ValueError, KeyError, TypeError):
                message = f"HTTP {resp.status} {resp.reason}"
            raise ApiError(message, resp.status)
        return json.loads(raw or b"{}")

    def submit(self, request: dict[str, Any]) -> dict[str, Any]:
        return self._call("POST", "/jobs", request)["job"]

    def jobs(self) -> list[dict[str, Any]]:
        return self._call("GET", "/jobs")["jobs"]

    def job(self, job_id: int) -> dict[str, Any]:
        return self._call("GET", f"/jobs/{job_id}")["job"]

    def cancel(self, job_id: int) -> dict[str, Any]:
        return self._call("DELETE", f"/jobs/{job_id}")["job"]

    def worker_config(self, job_id: int, worker_id: int) -> dict[str, Any]:
        return self._call("GET", f"/jobs/{job_id}/workers/{worker_id}")

    def memory(self) -> list[dict[str, Any]]:
        return self._call("GET", "/memory")["switches"]

    def switches(self) -> list[dict[str, Any]]:
        return self._call("GET", "/switches")["switches"]


def _error_text(err: urllib.error.HTTPError) -> str:
    try:
        return str(json.loads(err.read())["error"])
    except (ValueError, KeyError, TypeError):
        return f"HTTP {err.code} {err.reason}"


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
