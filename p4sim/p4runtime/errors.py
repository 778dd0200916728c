"""Errors the P4Runtime server reports, and their gRPC encoding.

Example::

    raise P4RTError(grpc.StatusCode.NOT_FOUND, "no table with id 0x2000001")
"""

from __future__ import annotations

import grpc
from finsy.proto import p4r, rpc_status
from google.protobuf import any_pb2


class P4RTError(Exception):
    """A request (or one update of a batch) failed with a canonical gRPC code."""

    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def code_number(code: grpc.StatusCode) -> int:
    """The canonical numeric value of a grpc.StatusCode (NOT_FOUND -> 5)."""
    return int(code.value[0])


def invalid(message: str) -> P4RTError:
    return P4RTError(grpc.StatusCode.INVALID_ARGUMENT, message)


def not_found(message: str) -> P4RTError:
    return P4RTError(grpc.StatusCode.NOT_FOUND, message)


def out_of_range(message: str) -> P4RTError:
    return P4RTError(grpc.StatusCode.OUT_OF_RANGE, message)


def unimplemented(message: str) -> P4RTError:
    return P4RTError(grpc.StatusCode.UNIMPLEMENTED, message)


def batch_status(errors: list[P4RTError | None]) -> rpc_status.Status:
    """google.rpc.Status (code UNKNOWN) with one Any-packed p4.v1.Error per update."""
    failed = sum(e is not None for e in errors)
    status = rpc_status.Status(
        code=code_number(grpc.StatusCode.UNKNOWN),
        message=f"{failed} of {len(errors)} update(s) failed",
    )
    for err in errors:
        item = p4r.Error(canonical_code=0)
        if err is not None:
            item.canonical_code = code_number(err.code)
            item.message = err.message
        packed = any_pb2.Any()
        packed.Pack(item)
        status.details.append(packed)
    return status


def abort_with_status(context: grpc.ServicerContext, status: rpc_status.Status) -> None:
    """End the RPC with ``status`` in the ``grpc-status-details-bin`` trailer (as
    grpcio-status does), so clients can unpack the per-update errors."""
    context.set_trailing_metadata((("grpc-status-details-bin", status.SerializeToString()),))
    context.abort(status_code(status.code), status.message)


def status_code(number: int) -> grpc.StatusCode:
    """The grpc.StatusCode whose canonical number is ``number`` (UNKNOWN if none)."""
    for code in grpc.StatusCode:
        if code.value[0] == number:
            return code
    return grpc.StatusCode.UNKNOWN
