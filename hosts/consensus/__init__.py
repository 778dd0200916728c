"""Consensus with the switch as sequencer: replicas and clients of the replicated log
(``replicated_log``)."""
