"""Jobs and switch memory: what a job is (``job``), the registry of job kinds every system
plugs into (``job_kinds``), the memory pools (``memory_manager``), the SQLite store
(``store``), the seed's sizing models (``sizing``), the event log (``events``) and the live
figures a kind reports (``figures``). Imports no system: the systems import this."""
