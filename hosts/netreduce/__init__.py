"""NetReduce's host side: the worker all-reduce client (``allreduce``) that ATP and Serene
build on, and the host-only baselines it is measured against, a parameter server (``ps``)
and ring all-reduce (``ring``)."""
