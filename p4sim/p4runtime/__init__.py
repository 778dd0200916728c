"""p4sim's P4Runtime server (``p4.v1.P4Runtime`` over gRPC).

Example::

    from p4sim.p4runtime import P4RuntimeServer
    srv = P4RuntimeServer(device_id=1, address="127.0.0.1:9559", cpu_port=255)
    srv.start()
    ...
    srv.stop()
"""

from p4sim.p4runtime.errors import P4RTError
from p4sim.p4runtime.server import P4RuntimeServer, TLSConfig, program_args, serve_forever

__all__ = ["P4RTError", "P4RuntimeServer", "TLSConfig", "program_args", "serve_forever"]
