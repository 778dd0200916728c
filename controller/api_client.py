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

Tokens (``controller/api/tenants.py``) need nothing from the user on the daemon's
machine: for a change to job J the client sends, the first it finds, the token given as
``token=`` or in ``$INC_TOKEN``, the one ``submit`` returned to this client for J,
``job-J.token`` and then ``operator.token`` in the token directory. That directory is
``token_dir=``, else ``$INC_TOKEN_DIR``, else where a daemon on this machine (``unix:PATH``
or a loopback address) says it writes them (``GET /tokens``), else ``run/``. A worker on
another machine is given its job's token (``INC_TOKEN=...`` in its environment) and an
``https://`` URL; ``$INC_CA_FILE`` (or ``ca_file=``) names the certificate that signs the
daemon's.
"""

from __future__ import annotations

import http.client
import ipaddress
import json
import os
import socket
import ssl
import urllib.parse
from pathlib import Path
from typing import Any

DEFAULT_URL = "http://127.0.0.1:7070"
UNIX_PREFIX = "unix:"
DEFAULT_TOKEN_DIR = Path("run")
OPERATOR_FILE = "operator.token"  # as controller/api/tenants.py writes them


class ApiError(Exception):
    """The daemon refused the request (``status`` is its HTTP status) or cannot be reached
    (``status`` 0); the message is meant for the user."""

    def __init__(self, message: str, status: int = 0) -> None:
        super().__init__(message)
        self.status = status


class ControllerApi:
    """``url``: ``http://HOST:PORT``, ``https://HOST:PORT`` or ``unix:PATH``; a malformed one
    raises ``ApiError``. ``token``, ``token_dir``, ``ca_file``: see the module's text."""

    def __init__(
        self,
        url: str = DEFAULT_URL,
        timeout: float = 150.0,
        token: str | None = None,
        token_dir: str | Path | None = None,
        ca_file: str | Path | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout
        self.token = token or os.environ.get("INC_TOKEN") or None
        self.job_tokens: dict[int, str] = {}  # the tokens of the jobs this client submitted
        if not self.url.startswith(UNIX_PREFIX):
            _check_http_url(self.url)
        folder = token_dir or os.environ.get("INC_TOKEN_DIR")
        self._token_dir = Path(folder) if folder else None
        self.ca_file = ca_file or os.environ.get("INC_CA_FILE") or None

    @property
    def token_dir(self) -> Path:
        """Where this machine's token files are (asked of the daemon once, if local)."""
        if self._token_dir is None:
            self._token_dir = DEFAULT_TOKEN_DIR
            if self._local():
                try:
                    told = self._call("GET", "/tokens", authorize=False).get("token_dir")
                except ApiError:
                    told = None
                if isinstance(told, str):
                    self._token_dir = Path(told)
        return self._token_dir

    def _local(self) -> bool:
        if self.url.startswith(UNIX_PREFIX):
            return True
        host = urllib.parse.urlsplit(self.url).hostname or ""
        try:
            return host == "localhost" or ipaddress.ip_address(host).is_loopback
        except ValueError:
            return False

    def tokens_for(self, job_id: int | None) -> list[str]:
        """The tokens a change to ``job_id`` (``None``: a submission) may go with, the
        narrowest first; the next is tried only when the daemon refuses one (403)."""
        if self.token is not None:
            return [self.token]
        found = []
        if job_id is not None:
            found.append(self.job_tokens.get(job_id))
            found.append(_read_token(self.token_dir / f"job-{job_id}.token"))
        found.append(_read_token(self.token_dir / OPERATOR_FILE))
        return list(dict.fromkeys(t for t in found if t is not None))

    def token_for(self, job_id: int | None) -> str | None:
        tokens = self.tokens_for(job_id)
        return tokens[0] if tokens else None

    def _connection(self, wait: float) -> tuple[http.client.HTTPConnection, str]:
        if self.url.startswith(UNIX_PREFIX):
            return _UnixConnection(self.url[len(UNIX_PREFIX) :], wait), ""
        parts = urllib.parse.urlsplit(self.url)
        if parts.scheme == "https":
            context = ssl.create_default_context(cafile=self.ca_file)
            return http.client.HTTPSConnection(parts.netloc, timeout=wait, context=context), (
                parts.path
            )
        return http.client.HTTPConnection(parts.netloc, timeout=wait), parts.path

    def _call(
        self,
        method: str,
        path: str,
        body: Any = None,
        timeout: float | None = None,
        job_id: int | None = None,
        authorize: bool = True,
    ) -> Any:
        data = None if body is None else json.dumps(body).encode()
        wait = self.timeout if timeout is None else timeout
        tokens: list[str | None] = [*self.tokens_for(job_id)] if authorize else []
        for token in tokens or [None]:
            headers = {"Content-Type": "application/json"}
            if token is not None:
                headers["Authorization"] = f"Bearer {token}"
            resp, raw = self._send(method, path, data, headers, wait)
            if resp.status != 403 or token is None or token == tokens[-1]:
                break  # a 403 changed nothing: the next token may be tried
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

    def _send(
        self, method: str, path: str, data: bytes | None, headers: dict[str, str], wait: float
    ) -> tuple[http.client.HTTPResponse, bytes]:
        try:
            conn, prefix = self._connection(wait)
        except (OSError, ssl.SSLError) as err:
            raise ApiError(f"cannot use the CA file {self.ca_file}: {err}") from None
        try:
            conn.request(method, prefix + path, body=data, headers=headers)
            resp = conn.getresponse()
            return resp, resp.read()
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

    def submit(self, request: dict[str, Any]) -> dict[str, Any]:
        """Admit a job (with the operator token); its own token is kept in ``job_tokens``."""
        answer = self._call("POST", "/jobs", request)
        job: dict[str, Any] = answer["job"]
        if isinstance(answer.get("token"), str):
            self.job_tokens[int(job["job_id"])] = answer["token"]
        return job

    def jobs(self) -> list[dict[str, Any]]:
        return self._call("GET", "/jobs")["jobs"]

    def job(self, job_id: int) -> dict[str, Any]:
        return self._call("GET", f"/jobs/{job_id}", job_id=job_id)["job"]

    def cancel(self, job_id: int) -> dict[str, Any]:
        job: dict[str, Any] = self._call("DELETE", f"/jobs/{job_id}", job_id=job_id)["job"]
        self.job_tokens.pop(job_id, None)  # it owns nothing now
        return job

    def set_mode(self, job_id: int, mode: str) -> dict[str, Any]:
        """Change a serene job's synchronisation mode (``incctl job mode``)."""
        return self._call("POST", f"/jobs/{job_id}/mode", {"mode": mode}, job_id=job_id)

    def sync_state(self, job_id: int) -> dict[str, Any]:
        """A serene job's mode and epoch clocks as the switch holds them."""
        return self._call("GET", f"/jobs/{job_id}/sync", job_id=job_id)

    def control_key(self, job_id: int) -> bytes:
        """The key of the job's control channels between its hosts (needs the job's token
        or the operator's, found as for a change)."""
        return bytes.fromhex(str(self._call("GET", f"/jobs/{job_id}/key", job_id=job_id)["key"]))

    def worker_config(self, job_id: int, worker_id: int) -> dict[str, Any]:
        return self._call("GET", f"/jobs/{job_id}/workers/{worker_id}", job_id=job_id)

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
        path = f"/jobs/{job_id}/workers/{worker_id}/progress"
        self._call("POST", path, body, timeout, job_id=job_id)

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
        return self._call("POST", f"/jobs/{job_id}/workers/{worker_id}/epoch", body, job_id=job_id)

    def schedule(self) -> dict[str, Any]:
        return self._call("GET", "/schedule")


def _read_token(path: Path) -> str | None:
    """The token in ``path``, or None when it is missing or not ours to read."""
    try:
        return path.read_text(encoding="ascii").strip() or None
    except (OSError, UnicodeDecodeError):
        return None


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
