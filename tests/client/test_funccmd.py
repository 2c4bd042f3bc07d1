"""A CustomTrainer function becomes a command that really runs, with kwargs and no needless pip."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from kubetrain.client.funccmd import function_command


def greet(name: str = "nobody", times: int = 1) -> None:
    for _ in range(times):
        print(f"hello {name}")


def _run(command: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    assert command[:2] == ["bash", "-c"]
    # pip must fail fast when it is reached at all: no retries against the unreachable index.
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
        "PIP_RETRIES": "0",
        "PIP_TIMEOUT": "1",
    }
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=60)


def test_func_args_are_keyword_arguments(tmp_path: Path) -> None:
    done = _run(function_command(greet, {"name": "ranks", "times": 2}, {}), tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["hello ranks", "hello ranks"]


def test_satisfied_packages_are_not_installed(tmp_path: Path) -> None:
    command = function_command(
        greet,
        None,
        {},
        packages=["PyYAML>=5", "pytest"],
        index_urls=["https://index.invalid/simple"],
    )
    done = _run(command, tmp_path)
    assert done.returncode == 0, done.stderr
    assert "already satisfied" in done.stdout
    assert not (tmp_path / "pip_install.log").exists()


def test_a_missing_package_goes_to_pip(tmp_path: Path) -> None:
    command = function_command(
        greet,
        None,
        {},
        packages=["no-such-package-kubetrain==0.0.1"],
        index_urls=["http://127.0.0.1:9/simple"],
    )
    done = _run(command, tmp_path)
    assert done.returncode == 1
    assert "pip install failed" in done.stderr


@pytest.mark.parametrize(
    ("policy", "launcher"),
    [
        pytest.param(
            {"torch": {}},
            "torchrun test_funccmd.py",
            id="torch runtimes start the file with torchrun",
        ),
        pytest.param(
            {"mpi": {}},
            "python /home/mpiuser/test_funccmd.py",
            id="MPI runtimes run python under mpirun",
        ),
        pytest.param({}, "python test_funccmd.py", id="other runtimes run python"),
    ],
)
def test_the_runtime_chooses_the_launcher(policy: dict[str, dict[str, str]], launcher: str) -> None:
    command = function_command(greet, None, policy)
    assert command[-1].rstrip().splitlines()[-1] == launcher
    assert (command[0] == "mpirun") == ("mpi" in policy)


def echo(x: object) -> None:
    print(repr(x))


def test_finding_5_dollar_parens_reach_the_function_unchanged(tmp_path: Path) -> None:
    from kubetrain.local.sandbox.envvars import expand

    value = "pw=$(PET_NNODES) $$(HOME) $ cost$"
    command = function_command(echo, {"x": value}, {})
    # What the kubelet does to a command before running it: $(VAR) expansion.
    env = {"PET_NNODES": "1", "HOME": "/root"}
    done = _run([expand(part, env) for part in command], tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == repr(value)


def _closure() -> object:
    secret = 3

    def inner() -> None:
        print(secret)

    return inner


REFUSED = [
    ("finding 5: a lambda", lambda: None, None, "is a lambda"),
    ("finding 5: a closure", _closure(), None, "uses variables of the function around it (secret)"),
    ("finding 5: an object argument", echo, {"x": object()}, "func_args['x'] = <object object"),
    ("finding 5: a NaN argument", echo, {"x": float("nan")}, "cannot be passed to the pod faithfully"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("func", "args", "message"), [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED]
)
def test_what_cannot_travel_faithfully_is_refused_before_anything_is_created(
    func: object, args: dict[str, object] | None, message: str
) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        function_command(func, args, {})  # type: ignore[arg-type]
