"""Who may do what through the API: tenants by token, and the operator.

Example::

    tenants = Tenants(store, token_dir=Path("run"))   # writes run/operator.token (0600)
    token = tenants.issue(job)        # at submission: the job's owner; run/job-1.token
    tenants.check(token, job)         # True for the job's own token or the operator's

A request names its token as ``Authorization: Bearer TOKEN``. Submitting a job takes the
operator token; the answer carries the new job's token, which owns that job (cancel, mode
changes, epochs, progress reports) and nothing else; the operator token owns everything.
A change without a token gets 401, with a token that does not own the job 403, and nothing
is changed either way. Reading is open to clients on this machine (loopback or the Unix
socket); a client elsewhere needs the job's token (or the operator's) for what is under
``/jobs/{id}``, and the operator token for the rest.

Only SHA-256 hashes of tokens are kept (job tokens in the controller's SQLite store, with
the job's admission time, so that a token of a cancelled job does not own a later job that
gets its id), and they are compared with ``hmac.compare_digest``. The tokens themselves are
handed over as files in ``token_dir`` (mode 0600, root or the daemon's user reads them):
``operator.token`` at each start, ``job-ID.token`` at each submission, removed at
cancellation, so that ``incctl`` and the job's hosts on this machine find them
(``controller/api_client.py``, which asks ``GET /tokens`` where they are) and a worker
elsewhere is given its job's token.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import os
import secrets
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Depends, Request
from starlette.exceptions import HTTPException

from controller.jobs.job import Job
from controller.jobs.store import JobStore

OPERATOR_FILE = "operator.token"
TOKEN_BYTES = 32


def job_token_file(job_id: int) -> str:
    return f"job-{job_id}.token"


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` readable by its owner only, never visible half-written."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)
    os.replace(tmp, path)


class Tenants:
    """Issues and checks tokens (touched from the daemon's loop only)."""

    def __init__(
        self, store: JobStore, token_dir: Path | None, operator_token: str | None = None
    ) -> None:
        self.store = store
        self.token_dir = token_dir
        self.operator_token = operator_token or secrets.token_urlsafe(TOKEN_BYTES)
        self._operator = _digest(self.operator_token)
        self._master: bytes | None = None
        if token_dir is not None:
            token_dir.mkdir(parents=True, exist_ok=True)
            _write_private(token_dir / OPERATOR_FILE, self.operator_token)

    def issue(self, job: Job) -> str:
        """A new token that owns ``job`` (replacing any earlier token of its id)."""
        token = secrets.token_urlsafe(TOKEN_BYTES)
        self.store.set_token(job.job_id, _digest(token), job.created_at)
        if self.token_dir is not None:
            _write_private(self.token_dir / job_token_file(job.job_id), token)
        return token

    def forget(self, job_id: int) -> None:
        self.store.remove_token(job_id)
        if self.token_dir is not None:
            (self.token_dir / job_token_file(job_id)).unlink(missing_ok=True)

    def control_key(self, job: Job) -> bytes:
        """The key of ``job``'s control channels (HMAC-SHA256 over each message between its
        hosts, ``hosts/transport/control_mac.py``): derived from the controller's secret and
        the job's id and admission time, so a later job with the same id gets another."""
        if self._master is None:
            self._master = self.store.master_key()
        return hmac.digest(self._master, f"job {job.job_id} {job.created_at!r}".encode(), "sha256")

    def is_operator(self, token: str | None) -> bool:
        return token is not None and hmac.compare_digest(_digest(token), self._operator)

    def owns(self, token: str | None, job: Job | None) -> bool:
        """``token`` is the operator's, or the one issued for this very job."""
        if self.is_operator(token):
            return True
        if token is None or job is None:
            return False
        stored = self.store.token(job.job_id)
        if stored is None or stored[1] != job.created_at:
            return False
        return hmac.compare_digest(_digest(token), stored[0])


# ------------------------------------------------------------------ FastAPI dependencies


def bearer(request: Request) -> str | None:
    value = request.headers.get("authorization", "")
    scheme, _, token = value.partition(" ")
    return (token.strip() or None) if scheme.lower() == "bearer" else None


def is_local(request: Request) -> bool:
    """The client is on this machine: the Unix socket (no address) or a loopback address."""
    client: Any = request.client
    if client is None or not client.host:
        return True
    try:
        return ipaddress.ip_address(str(client.host)).is_loopback
    except ValueError:
        return False


def tenants_of(request: Request) -> Tenants:
    tenants: Tenants = request.app.state.tenants
    return tenants


def _job(request: Request, job_id: int) -> Job | None:
    try:
        job: Job = request.app.state.ctx.manager.get(job_id)
    except KeyError:  # UnknownJob: no job owned, whatever the token
        return None
    return job


def _refuse(token: str | None, what: str) -> HTTPException:
    if token is None:
        return HTTPException(
            401,
            f"{what} needs a token (Authorization: Bearer): the job's, from its submission,"
            " or the operator's (operator.token beside the daemon's socket)",
            headers={"WWW-Authenticate": "Bearer"},
        )
    return HTTPException(403, f"this token does not allow {what}")


def operator(request: Request) -> None:
    """Dependency: the operator token (submitting a job)."""
    token = bearer(request)
    if not tenants_of(request).is_operator(token):
        raise _refuse(token, "submitting a job")


def job_owner(request: Request) -> None:
    """Dependency of every change to a job: its own token or the operator's."""
    token = bearer(request)
    raw_id = str(request.path_params["job_id"])
    job_id = int(raw_id) if raw_id.isdigit() else -1  # not an id: the route answers 400
    if job_id >= 0 and not tenants_of(request).owns(token, _job(request, job_id)):
        raise _refuse(token, f"changing job {job_id}")


def reader(request: Request) -> None:
    """Dependency of every route (the app's): reading is open on this machine; from
    elsewhere it takes the job's token under ``/jobs/{id}``, else the operator's."""
    if is_local(request):
        return
    token = bearer(request)
    tenants = tenants_of(request)
    raw_id = request.path_params.get("job_id")
    if isinstance(raw_id, str) and raw_id.isdigit():
        if tenants.owns(token, _job(request, int(raw_id))):
            return
    elif tenants.is_operator(token):
        return
    raise _refuse(token, "reading from another machine")


router = APIRouter(tags=["tenants"])


@router.get("/jobs/{job_id}/key", dependencies=[Depends(job_owner)])
async def control_key(request: Request, job_id: int) -> dict[str, str]:
    """The key of the job's control channels, for its own hosts: it takes the job's token
    (or the operator's) from every client, on this machine too."""
    job = _job(request, job_id)  # job_owner refused every token but the job's and operator's
    if job is None:
        raise HTTPException(404, f"no job {job_id}")
    return {"key": tenants_of(request).control_key(job).hex()}


@router.get("/tokens")
async def where(request: Request) -> dict[str, str | None]:
    """Where this machine's clients find the tokens (files only root or the daemon's user
    may read: knowing the folder gives nothing to anyone else). Not told to other machines."""
    if not is_local(request):
        raise HTTPException(403, "the token folder is told to clients on this machine only")
    folder = tenants_of(request).token_dir
    return {"token_dir": None if folder is None else str(folder.resolve())}
