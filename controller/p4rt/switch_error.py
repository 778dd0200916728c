"""What a switch refused, or why it could not be reached: the one error of P4Runtime access.

Raised by the P4Runtime client (``controller/p4rt/p4runtime_client.py``) and by the register
back ends (``controller/p4rt/registers.py``); its own module so that neither imports the other's
callers. Example::

    try:
        await sw.insert(entries)
    except SwitchError as err:
        if err.only(GRPCStatusCode.ALREADY_EXISTS): ...   # every failed update existed
"""

from __future__ import annotations

from finsy.grpcutil import GRPCStatusCode


class SwitchError(Exception):
    """A switch refused or could not be reached; the message says which switch and why."""

    def __init__(
        self,
        message: str,
        code: GRPCStatusCode | None = None,
        details: dict[int, GRPCStatusCode] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.details = details or {}  # index of each failed update -> its code

    def only(self, code: GRPCStatusCode) -> bool:
        """True when this is a Write whose failed updates all failed with ``code``."""
        return bool(self.details) and all(c == code for c in self.details.values())
