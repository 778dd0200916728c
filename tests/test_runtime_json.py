import json

import pytest

from p4rt_config.runtime_json import RuntimeJsonError, load_runtime_json, parse_value


def test_values_accept_addresses_macs_hex_and_ints():
    assert parse_value("10.0.1.1") == 0x0A000101
    assert parse_value("08:00:00:00:01:11") == 0x080000000111
    assert parse_value("0x0800") == 0x800
    assert parse_value(7) == 7
    assert parse_value("::1") == 1


def test_unreadable_value_is_a_clear_error():
    with pytest.raises(ValueError, match="cannot read 'ten'"):
        parse_value("ten")


def test_tutorial_runtime_file_parses_entries_groups_and_sessions(tmp_path):
    f = tmp_path / "s1-runtime.json"
    f.write_text(
        json.dumps(
            {
                "table_entries": [
                    {
                        "table": "I.t",
                        "default_action": True,
                        "action_name": "I.drop",
                        "action_params": {},
                    },
                    {
                        "table": "I.t",
                        "match": {"hdr.ipv4.dstAddr": ["10.0.1.1", 32]},
                        "action_name": "I.fwd",
                        "action_params": {"port": 1, "mac": "00:00:00:00:00:01"},
                    },
                    {
                        "table": "I.acl",
                        "match": {"x": [5, "0xff"]},
                        "priority": 10,
                        "action_name": "I.deny",
                        "action_params": {},
                    },
                ],
                "multicast_group_entries": [
                    {
                        "multicast_group_id": 1,
                        "replicas": [
                            {"egress_port": 1, "instance": 1},
                            {"egress_port": 2, "instance": 1},
                        ],
                    }
                ],
                "clone_session_entries": [
                    {
                        "clone_session_id": 5,
                        "replicas": [{"egress_port": 3, "instance": 0}],
                        "packet_length_bytes": 64,
                    }
                ],
            }
        )
    )
    cfg = load_runtime_json(f)
    default, fwd, acl = cfg.table_entries
    assert default.is_default and default.action == "I.drop"
    assert fwd.match == {"hdr.ipv4.dstAddr": (0x0A000101, 32)}
    assert fwd.params == {"port": 1, "mac": 1}
    assert acl.priority == 10 and acl.match == {"x": (5, 0xFF)}
    assert cfg.multicast_groups[0].replicas == [(1, 1), (2, 1)]
    assert cfg.clone_sessions[0].packet_length_bytes == 64


def test_bad_entry_names_the_file_and_the_entry(tmp_path):
    f = tmp_path / "bad.json"
    f.write_text(json.dumps({"table_entries": [{"table": "t", "match": {}}]}))
    with pytest.raises(RuntimeJsonError, match=r"bad.json: table_entries\[0\]: missing"):
        load_runtime_json(f)


def test_invalid_json_reports_line_and_column(tmp_path):
    f = tmp_path / "broken.json"
    f.write_text('{\n  "table_entries": [,]\n}')
    with pytest.raises(RuntimeJsonError, match=r"broken.json:2:\d+: invalid JSON"):
        load_runtime_json(f)


def test_p4sim_reads_the_same_runtime_json_format_as_the_controller() -> None:
    import p4rt_config.runtime_json as shared
    import p4sim.runtime_json as p4sim_side

    assert p4sim_side.load_runtime_json is shared.load_runtime_json
    assert p4sim_side.RuntimeJsonError is shared.RuntimeJsonError
