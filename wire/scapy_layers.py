"""Scapy layer of the INC header, for tests, debugging and pcap dissection.

Importing this module binds ``INC`` above UDP on ``INC_UDP_PORT`` (either port), so that
``Ether(frame)`` dissects INC packets. The hot paths never import Scapy: they use
``wire.header``'s struct packers.
"""

from __future__ import annotations

from scapy.fields import (
    BitField,
    ByteEnumField,
    ByteField,
    FieldLenField,
    FieldListField,
    FlagsField,
    IntField,
    ShortField,
    SignedIntField,
    XIntField,
)
from scapy.layers.inet import UDP
from scapy.packet import Packet, bind_bottom_up, bind_layers

from wire.header import INC_UDP_PORT, Flag, Op


class INC(Packet):
    """Scapy layer of the INC header and its value slots (``slot_count`` is filled in).

    >>> bytes(INC(op="AGG_SYNC", job_id=1, values=[1, -1]))[6]
    2
    """

    name = "INC"
    fields_desc = [
        ByteEnumField("op", Op.AGG_SYNC, {o.value: o.name for o in Op}),
        FlagsField("flags", 0, 8, [str(f.name) for f in Flag if f.value]),  # bit i = 1 << i
        ShortField("job_id", 0),
        ByteField("worker_id", 0),
        BitField("ver", 0, 1),
        BitField("reserved0", 0, 7),
        FieldLenField("slot_count", None, count_of="values", fmt="B"),
        ByteField("reserved1", 0),
        IntField("psn", 0),
        IntField("agg_idx", 0),
        IntField("epoch", 0),
        XIntField("bitmap", 0),
        FieldListField("values", [], SignedIntField("", 0), count_from=lambda p: p.slot_count),
    ]


bind_layers(UDP, INC, sport=INC_UDP_PORT, dport=INC_UDP_PORT)
bind_bottom_up(UDP, INC, dport=INC_UDP_PORT)
bind_bottom_up(UDP, INC, sport=INC_UDP_PORT)
