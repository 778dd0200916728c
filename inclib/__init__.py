"""inclib: one programming interface for in-network computing.

An application asks the controller for switch resources once (``admit``), hands the
resulting plan to its workers, and each worker opens a ``Session`` on it (``join``)::

    import inclib

    plan = inclib.admit("unix:run/x/controller.sock", workers=4, name="train")
    ...                                   # give plan.to_json() to every worker
    with inclib.join(plan, worker_id=rank) as s:
        grads = s.allreduce(grads)        # summed in the switch, or on the hosts

When the switch cannot serve (no controller, no switch, no memory left) ``admit`` returns
a host-only plan and ``join`` says so once, on one line, to stderr; the application runs
unchanged. The package talks to the controller only through its HTTP API
(``controller.api_client``) and to switches and peers only through the wire protocol
(``wire/``, via the transports of ``hosts/``).
"""

from inclib.block_quantize import BlockQuantized, block_allreduce
from inclib.kv import KvStorage
from inclib.log import LogReplica
from inclib.plan import Plan, admit
from inclib.session import ReducerSession, Session, join, reducer

__all__ = [
    "BlockQuantized",
    "KvStorage",
    "LogReplica",
    "Plan",
    "ReducerSession",
    "Session",
    "admit",
    "block_allreduce",
    "join",
    "reducer",
]
