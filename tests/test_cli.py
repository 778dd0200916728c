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
