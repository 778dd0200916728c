"""The control plane: P4Runtime client, job admission daemon, memory manager, incctl.

Layers, each using only those before it (see controller/README.md):
p4runtime_client (+ registers, runtime_config), memory_manager -> job -> job_region,
result_rewrite, aggregator -> store -> jobs -> daemon; api_client -> incctl.
"""
