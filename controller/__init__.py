"""The control plane, in layers, each importing only those before it
(``controller/README.md``, ``docs/architecture.md``):

``p4rt/`` (P4Runtime access) -> ``jobs/`` (jobs, kind registry, memory, store) ->
``systems/`` (one module per system, paired with its ``p4src/`` control) -> ``sched/``
(scheduling) -> ``job_manager`` (admission) -> ``api/`` (HTTP API, dashboard, metrics) ->
``daemon``. ``api_client`` and ``incctl`` talk to the daemon over HTTP only.
"""
