"""What of the host a pod sees (finding 1 of issue 13): nothing of the engine, no home
directory, and exactly the environment its image maps to, wherever that lives."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from sandbox_support import make_ctx, make_pod, needs_bwrap, run, sh

from kubetrain.local.sandbox import ImageEnv, ImageMap
from kubetrain.local.sandbox.visibility import image_roots, private_roots

pytestmark = needs_bwrap

# Run inside the pod: every hidden root's entries, and whether the secret can be read.
PROBE = """
import json, os, sys
out = {}
for path in sys.argv[1:]:
    try:
        out[path] = sorted(os.listdir(path))
    except OSError as err:
        out[path] = type(err).__name__
print(json.dumps(out))
"""


@pytest.fixture
def engine_home() -> Iterator[Path]:
    """An engine home outside /tmp (which is private in every pod anyway), with a secret."""
    home = Path(tempfile.mkdtemp(prefix="kubetrain-visibility-", dir="/var/tmp"))
    (home / "apiserver.token").write_text("admin-token\n")
    (home / "pods" / "other-pod").mkdir(parents=True)
    try:
        yield home
    finally:
        shutil.rmtree(home, ignore_errors=True)


def _probe_pod(paths: list[str]) -> dict[str, object]:
    command = [sys.executable, "-c", PROBE, *paths]
    return make_pod(containers=[{"name": "main", "image": "x", "command": command}])


def _shown_path(path: str, shown: tuple[str, ...]) -> bool:
    """``path`` is a shown directory or lies on the way to one."""
    return any(s == path or s.startswith(path.rstrip("/") + "/") for s in shown)


async def test_finding_1_the_engine_home_and_every_home_are_hidden_from_a_pod(
    tmp_path: Path, engine_home: Path
) -> None:
    ctx = make_ctx(tmp_path, engine_home=engine_home)
    hidden = private_roots(*ctx.engine_dirs())
    assert str(engine_home) in hidden and "/root" in hidden
    result, logs = await run(_probe_pod([*hidden, str(engine_home / "pods")]), ctx)
    assert result.succeeded, logs
    seen = json.loads(logs["main"].splitlines()[-1])
    shown = image_roots(ctx.images.default)
    for path, entries in seen.items():
        # Empty, or only the way down to the interpreter the pod runs on (sys.base_prefix).
        assert isinstance(entries, str) or all(
            _shown_path(os.path.join(path, e), shown) for e in entries
        ), f"{path} shows {entries} inside the pod"
    assert seen[str(engine_home)] == []


async def test_a_pod_can_still_write_its_home_but_the_host_keeps_nothing(tmp_path: Path) -> None:
    marker = f"kubetrain-visibility-{os.getpid()}"
    script = f'touch "$HOME/{marker}" && ls "$HOME/{marker}"'
    result, logs = await run(make_pod(containers=[sh(script)]), make_ctx(tmp_path))
    assert result.succeeded, logs
    assert not (Path.home() / marker).exists()


@pytest.fixture
def private_venv(tmp_path: Path) -> Path:
    """A venv under a temporary directory, with an editable-style .pth source directory."""
    venv = tmp_path / "clone" / ".venv"
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=60
    )
    src = tmp_path / "clone" / "src"
    (src / "probe_pkg").mkdir(parents=True)
    (src / "probe_pkg" / "__init__.py").write_text("WHERE = 'editable source'\n")
    site = next(venv.glob("lib/python*/site-packages"))
    (site / "__editable__.probe.pth").write_text(f"{src}\n")
    return venv


async def test_a_venv_under_a_temporary_directory_runs_in_a_pod(
    tmp_path: Path, private_venv: Path
) -> None:
    image = ImageEnv(prefix=private_venv)
    ctx = make_ctx(tmp_path / "engine", images=ImageMap(default=image))
    code = "import sys, probe_pkg; print(sys.prefix, probe_pkg.WHERE)"
    pod = make_pod(containers=[{"name": "main", "image": "x", "command": ["python", "-c", code]}])
    result, logs = await run(pod, ctx)
    assert result.succeeded, logs
    assert logs["main"].split("\n")[-2] == f"{private_venv} editable source"
    # Exactly the prefix, its interpreter and its source tree: not the directory around them.
    assert str(private_venv.parent) not in image_roots(image)
