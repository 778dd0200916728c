"""The wire format that the switch program, the controller and the hosts share.

``wire.header`` (the INC header, its constants and packers), ``wire.framing``
(Ethernet/IPv4/UDP around it) and ``wire.scapy_layers`` (Scapy dissection). Nothing here
imports the controller or host code, so both may depend on it.
"""
