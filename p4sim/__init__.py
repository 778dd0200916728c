"""p4sim: a pure-Python P4_16 target for the v1model architecture (BMv2-compatible).

Example::

    from p4sim import Switch
    sw = Switch.from_file("basic.p4")
    sw.send(0, packet)
"""

from p4sim.frontend.diagnostics import P4Error
from p4sim.switch import Switch, SwitchError

__all__ = ["P4Error", "Switch", "SwitchError"]
