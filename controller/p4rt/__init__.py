"""P4Runtime access: the client (``p4runtime_client``), its one error (``switch_error``),
register back ends for p4sim and BMv2 (``registers``), and the tutorials' runtime JSON
written over P4Runtime (``runtime_config``). Knows P4Runtime, not our P4 program: the
modules that know ``p4src/`` names are in ``controller/systems/``."""
