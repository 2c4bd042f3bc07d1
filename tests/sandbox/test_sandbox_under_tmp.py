"""A project cloned under the host's ``/tmp``: its venv is the image of every pod, while each
pod has a ``/tmp`` of its own (a private tmpfs, or a volume mounted there, as the installed
controller's Deployment does). The venv and its editable source stay visible at their paths,
and a program missing from them is refused before start, wherever the checkout running these
tests lives."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sandbox_support import make_ctx, make_pod, needs_bwrap, run

from kubetrain.local.sandbox import ImageEnv, ImageMap, SandboxError

pytestmark = needs_bwrap

CODE = (
    "import sys, probe_pkg; open('/tmp/written', 'w').write('x'); "
    "print(sys.prefix, probe_pkg.WHERE)"
)
TMP_EMPTYDIR = {"volumes": [{"name": "tmp", "emptyDir": {}}]}
AT_TMP = {"volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}]}
TMP_CONFIGMAP = {"volumes": [{"name": "tmp", "configMap": {"name": "cm"}}]}


@pytest.fixture(scope="module")
def clone() -> Iterator[Path]:
    """A clone under the host's /tmp (not pytest's base dir, which may live elsewhere): a venv
    with an editable-style ``.pth`` naming its ``src``."""
    root = Path(tempfile.mkdtemp(prefix="kubetrain-clone-", dir="/tmp"))
    try:
        venv = root / ".venv"
        subprocess.run(
            [sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=60
        )
        (root / "src" / "probe_pkg").mkdir(parents=True)
        (root / "src" / "probe_pkg" / "__init__.py").write_text("WHERE = 'editable source'\n")
        site = next(venv.glob("lib/python*/site-packages"))
        (site / "__editable__.probe.pth").write_text(f"{root / 'src'}\n")
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _pod(command: list[str], pod: dict[str, Any], container: dict[str, Any]) -> dict[str, Any]:
    main = {"name": "main", "image": "x", "command": command, **container}
    return make_pod(containers=[main], **pod)


RUNS = [
    ("in the pod's private /tmp", {}, {}),
    ("under an emptyDir at /tmp, which stays the pod's own", TMP_EMPTYDIR, AT_TMP),
]


@pytest.mark.parametrize(("pod", "container"), [r[1:] for r in RUNS], ids=[r[0] for r in RUNS])
async def test_a_venv_under_the_hosts_tmp_runs(
    tmp_path: Path, clone: Path, pod: dict[str, Any], container: dict[str, Any]
) -> None:
    ctx = make_ctx(tmp_path, images=ImageMap(default=ImageEnv(prefix=clone / ".venv")))
    result, logs = await run(_pod(["python", "-c", CODE], pod, container), ctx)
    assert result.succeeded, logs
    assert logs["main"].split("\n")[-2] == f"{clone / '.venv'} editable source"
    assert not Path("/tmp/written").exists()
    if pod:
        assert (ctx.pod_dir / "volumes" / "tmp" / "written").read_text() == "x"


MISSING = [
    ("a program missing from a PATH under /tmp is refused before start",
     ["no-such-program-xyz"], {}, {}, 'exec: "no-such-program-xyz": executable file not found'),
    ("so it is under an emptyDir at /tmp",
     ["no-such-program-xyz"], TMP_EMPTYDIR, AT_TMP, 'exec: "no-such-program-xyz"'),
    ("a missing absolute path into the venv is refused before start",
     ["{venv}/bin/no-such-program-xyz"], TMP_EMPTYDIR, AT_TMP, "stat {venv}/bin/no-such"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("command", "pod", "container", "error"), [m[1:] for m in MISSING], ids=[m[0] for m in MISSING]
)
async def test_a_missing_program_is_a_start_error(
    tmp_path: Path,
    clone: Path,
    command: list[str],
    pod: dict[str, Any],
    container: dict[str, Any],
    error: str,
) -> None:
    venv = str(clone / ".venv")
    ctx = make_ctx(tmp_path, images=ImageMap(default=ImageEnv(prefix=Path(venv))))
    argv = [c.format(venv=venv) for c in command]
    with pytest.raises(SandboxError, match=error.format(venv=venv)) as err:
        await run(_pod(argv, pod, container), ctx)
    assert err.value.reason == "RunContainerError"


async def test_a_read_only_volume_at_tmp_hides_the_venv_and_exec_says_so(
    tmp_path: Path, clone: Path
) -> None:
    # No mount point can be made in a read-only volume: the volume wins, as over an image's
    # own files; the program is then not found by exec, not by the start check.
    image = ImageMap(default=ImageEnv(prefix=clone / ".venv"))
    ctx = make_ctx(tmp_path, images=image, config_maps={"cm": {"k": "v"}})
    pod = _pod([f"{clone}/.venv/bin/python", "-c", "pass"], TMP_CONFIGMAP, AT_TMP)
    result, logs = await run(pod, ctx)
    assert result.containers == {"main": 1}
    assert "No such file or directory" in logs["main"], logs
