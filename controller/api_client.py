"""Client of the controller daemon's HTTP/JSON API (``incctl`` and worker agents use it).

Example::

    api = ControllerApi("http://127.0.0.1:7070")
    job = api.submit({"workers": 4, "window": 64})
    cfg = api.worker_config(job["job_id"], 0)    # region_offset, region_size, window, ...
    api.cancel(job["job_id"])

Stdlib only (urllib), so a worker host needs nothing more to ask for its configuration.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

DEFAULT_URL = "http://127.0.0.1:7070"


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
