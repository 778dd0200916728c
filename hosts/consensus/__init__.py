"""Consensus with the switch as sequencer: the replicated log's frames and entries
(``log_wire``), its replica (``replica``; its request path in C: ``native_replica``),
clients (``log_client``, ``pipelined_client``), command line (``replicated_log``) and
history checker (``log_check``)."""
