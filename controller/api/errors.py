"""One error shape for every failure: ``{"error": "one line a user can act on"}``.

A request that names a wrong type, a missing field, a path parameter out of range, a body
that is not JSON, an unknown route or method: 4xx with one line. A switch that fails: 502.
A bug: 500 with one line (the traceback goes to the daemon's log, not to the client).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from controller.job_manager import UnknownJob
from controller.jobs.job import JobError
from controller.jobs.job_kinds import kinds
from controller.jobs.memory_manager import OutOfMemory
from controller.p4rt.p4runtime_client import SwitchError
from controller.sched.scheduled_jobs import EpochError

log = logging.getLogger("controller.api")
MAX_SHOWN = 4  # validation problems named in one message


def error(status: int, message: str, headers: Mapping[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status, headers=headers)


def one_line(errors: Sequence[Any]) -> str:
    """pydantic/FastAPI validation errors as ``field: problem; ...`` (where, not input)."""
    parts = []
    tags = set(kinds())
    for e in errors:
        loc = [str(x) for x in e.get("loc", ())]
        if e.get("type") == "json_invalid":
            parts.append(f"the body is not valid JSON: {e.get('ctx', {}).get('error', 'syntax')}")
            continue
        if loc[:1] == ["body"]:
            loc = loc[1:]
            if loc and loc[0] in tags:  # the union's branch: the kind, not a field
                loc = loc[1:]
            if not loc and e.get("type") == "missing":
                parts.append("the request needs a JSON body")
                continue
        elif loc[:1] in (["path"], ["query"]):
            loc = loc[1:]
        msg = str(e.get("msg", "invalid")).removeprefix("Value error, ")
        where = ".".join(loc)
        parts.append(f"{where}: {msg}" if where else msg)
    if len(parts) > MAX_SHOWN:
        parts = parts[:MAX_SHOWN] + [f"and {len(parts) - MAX_SHOWN} more problems"]
    return "; ".join(dict.fromkeys(parts))


def install(app: FastAPI) -> None:
    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> JSONResponse:
        message = str(exc.detail)
        if exc.status_code == 404 and message == "Not Found":
            message = f"no such resource: {request.url.path}"
        elif exc.status_code == 405:
            message = f"{request.method} not allowed on {request.url.path}"
        elif exc.status_code == 400 and message == "There was an error parsing the body":
            message = "the body is not valid JSON (UTF-8, nested at most a few hundred levels)"
        return error(exc.status_code, message, exc.headers)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        return error(400, one_line(exc.errors()))

    @app.exception_handler(JobError)
    async def job_error(request: Request, exc: JobError) -> JSONResponse:
        return error(400, str(exc))

    @app.exception_handler(EpochError)
    async def epoch_error(request: Request, exc: EpochError) -> JSONResponse:
        return error(409, str(exc))

    @app.exception_handler(UnknownJob)
    async def unknown_job(request: Request, exc: UnknownJob) -> JSONResponse:
        return error(404, str(exc))

    @app.exception_handler(OutOfMemory)
    async def out_of_memory(request: Request, exc: OutOfMemory) -> JSONResponse:
        return error(409, str(exc))

    @app.exception_handler(SwitchError)
    async def switch_error(request: Request, exc: SwitchError) -> JSONResponse:
        return error(502, str(exc).splitlines()[0] if str(exc) else "switch error")

    @app.exception_handler(Exception)
    async def bug(request: Request, exc: Exception) -> JSONResponse:
        log.exception("%s %s failed", request.method, request.url.path)
        text = str(exc).splitlines()[0] if str(exc) else ""
        return error(500, f"internal error ({type(exc).__name__}{': ' + text if text else ''})")
