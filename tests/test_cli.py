import subprocess
import sys

from p4sim.cli import main


def test_bad_interface_flag_gives_usage_not_traceback(capsys):
    assert main(["-i", "eth0", "prog.p4"]) == 2
    err = capsys.readouterr().err
    assert "-i expects PORT@IFACE, got 'eth0'" in err
    assert "Traceback" not in err


def test_missing_program_is_a_usage_error(capsys):
    assert main(["-i", "1@veth1"]) == 2
    assert "a P4 program is required" in capsys.readouterr().err


def test_unknown_flag_is_a_usage_error(capsys):
    assert main(["--frobnicate", "prog.p4"]) == 2
    assert "unrecognized arguments: --frobnicate" in capsys.readouterr().err


def test_console_script_runs_as_a_module():
    r = subprocess.run(
        [sys.executable, "-m", "p4sim.cli", "--help"], capture_output=True, text=True, check=False
    )
    assert r.returncode == 0
    assert "PORT@IFACE" in r.stdout and "--grpc-server-addr" in r.stdout


def test_compile_of_a_missing_file_is_one_clean_error(tmp_path, capsys):
    missing = tmp_path / "nope.p4"
    assert main(["compile", str(missing)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"{missing}: error: cannot read file")
    assert ":0:0" not in err and "Traceback" not in err


def test_compile_of_a_bad_program_points_at_line_and_column(tmp_path, capsys):
    prog = tmp_path / "bad.p4"
    prog.write_text("#include <core.p4>\n#include <v1model.p4>\nheader h_t { bit<8> x }\n")
    assert main(["compile", str(prog)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"{prog}:3:")
    assert "^" in err  # the caret under the column
