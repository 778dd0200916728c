"""ATP's host side: the worker (``worker``: hashed addressing into the shared pool, AIMD)
and the parameter server that finishes what the switch could not (``ps``)."""
