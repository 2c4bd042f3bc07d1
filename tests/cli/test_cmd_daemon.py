"""``kubetrain daemon start|stop|status`` and ``kubetrain doctor``: what they say and their exit codes."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(60)


def run(capsys: pytest.CaptureFixture[str], command: str, *argv: str) -> tuple[int, str, str]:
    import importlib

    module = importlib.import_module(f"kubetrain.cli.cmd_{command}")
    parser = argparse.ArgumentParser(prog=f"kubetrain {command}")
    module.add_arguments(parser)
    capsys.readouterr()
    code = module.run(parser.parse_args(list(argv)))
    out, err = capsys.readouterr()
    return code, out, err


def test_daemon_lifecycle_and_its_exit_codes(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    home = str(tmp_path / "home")
    code, out, _ = run(capsys, "daemon", "status", "--home", home)
    assert code == 1 and "not running" in out
    try:
        code, out, _ = run(capsys, "daemon", "start", "--home", home)
        assert code == 0 and out.startswith("Daemon:     running at https://127.0.0.1:")
        code, out, _ = run(capsys, "daemon", "status", "--home", home, "-o", "json")
        report = json.loads(out)
        assert (code, report["ready"], report["context"]) == (0, True, "kubetrain-local")
        assert Path(report["kubeconfig"]).is_file()
    finally:
        code, out, _ = run(capsys, "daemon", "stop", "--home", home, "--kill-pods")
    assert code == 0 and out.startswith("stopped the kubetrain daemon (pid ")
    code, out, _ = run(capsys, "daemon", "stop", "--home", home)
    assert (code, out) == (0, "no kubetrain daemon was running\n")


def test_doctor_reports_sandbox_images_tools_and_daemon(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBETRAIN_HOME", str(tmp_path))
    code, out, _ = run(capsys, "doctor", "-o", "json")
    report = json.loads(out)
    assert code == 0
    assert report["sandbox"]["mode"] in ("bwrap", "plain")
    assert "*" in report["sandbox"]["images"]
    assert report["daemon"]["running"] is False
    code, text, _ = run(capsys, "doctor")
    assert code == 0
    assert text.startswith(f"Sandbox:           {report['sandbox']['mode']}")
    assert "Daemon:            not running" in text
