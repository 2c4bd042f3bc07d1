"""The official Kubernetes Python client's own e2e suite, run unchanged against ``kubetrain serve``.

The suite (``kubernetes/e2e_test`` and ``kubernetes/aio/e2e_test`` of kubernetes-client/python,
release v36.0.3) is not part of this repository: ``python tools/fetch_upstream.py --client-e2e``
puts it, next to the matching ``kubernetes`` wheel, under ``.upstream/kubernetes-client/site``.
This script starts ``kubetrain serve`` (the whole local control plane) in a temporary
KUBETRAIN_HOME, points the suite at it through ``KUBECONFIG`` (the suite's own way of finding a
cluster), runs it with pytest and prints one line per test and the totals:

    .venv/bin/python benchmarks/kube_client_e2e.py [-k EXPR] [--json OUT] [--per-test 120]

Exit status: 0 when every selected test passed, 1 when some failed, 2 when the suite is absent.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

__all__ = ["Outcome", "main", "run_suite"]

REPO = Path(__file__).resolve().parents[1]
SITE = REPO / ".upstream" / "kubernetes-client" / "site"
SUITES = ("kubernetes/e2e_test", "kubernetes/aio/e2e_test")


@dataclass(frozen=True)
class Outcome:
    """One test of the suite: its pytest id, pass/fail/error/skip, and the first line of why."""

    test: str
    result: str
    seconds: float
    reason: str = ""


def missing(site: Path = SITE) -> list[str]:
    """The suite's folders (and the client package) absent from ``site``."""
    wanted = ["kubernetes/__init__.py", *(f"{s}/base.py" for s in SUITES)]
    return [str(site / w) for w in wanted if not (site / w).is_file()]


def _serve(home: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "KUBETRAIN_HOME": str(home)}
    log = (home / "serve.log").open("wb")
    return subprocess.Popen(
        [sys.executable, "-m", "kubetrain.cli.main", "serve", "--home", str(home)],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )


def _wait_for(path: Path, proc: subprocess.Popen[bytes], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        if proc.poll() is not None:
            raise SystemExit(f"kubetrain serve exited with {proc.returncode} before it was ready")
        if time.monotonic() > deadline:
            raise SystemExit(f"kubetrain serve wrote no {path} within {seconds:.0f} s")
        time.sleep(0.1)


def _outcomes(junit: Path) -> list[Outcome]:
    out = []
    for case in ET.parse(junit).getroot().iter("testcase"):
        module = (case.get("classname") or "").rsplit(".", 1)
        path = module[0].replace(".", "/") + ".py" if len(module) == 2 else ""
        test = f"{path}::{module[-1]}::{case.get('name')}"
        result, reason = "passed", ""
        for tag in ("failure", "error", "skipped"):
            node = case.find(tag)
            if node is not None:
                result = {"failure": "failed", "error": "error", "skipped": "skipped"}[tag]
                reason = (node.get("message") or node.text or "").strip().splitlines()[0][:200]
                break
        out.append(Outcome(test, result, float(case.get("time") or 0.0), reason))
    return out


def run_suite(
    site: Path = SITE,
    select: str = "",
    per_test: int = 120,
    keep: Path | None = None,
    kubeconfig: Path | None = None,
    tests: Sequence[str] = (),
) -> list[Outcome]:
    """Run the suite (or only ``tests``, pytest node ids) against ``kubeconfig``'s cluster, or
    else against a ``kubetrain serve`` started for the run; return each test's outcome."""
    with tempfile.TemporaryDirectory(prefix="kt-client-e2e-") as tmp:
        home = keep or Path(tmp)
        home.mkdir(parents=True, exist_ok=True)
        proc = _serve(home) if kubeconfig is None else None
        try:
            if proc is not None:
                _wait_for(home / "kubeconfig", proc, 120)
            ini = Path(tmp) / "pytest.ini"
            ini.write_text("[pytest]\n")  # none of this repository's pytest settings apply
            junit = Path(tmp) / "junit.xml"
            cmd = [
                sys.executable, "-m", "pytest", "-c", str(ini), "--rootdir", str(site),
                "-p", "no:cacheprovider", "-p", "no:asyncio", "-q",
                "--continue-on-collection-errors", "--timeout", str(per_test),
                f"--junitxml={junit}", *(tests or SUITES),
            ]  # fmt: skip
            if select:
                cmd += ["-k", select]
            env = {
                # The outer run's pytest options (PYTEST_ADDOPTS) are not the suite's.
                **{k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"},
                "KUBECONFIG": str(kubeconfig or home / "kubeconfig"),
                # The suite imports itself as part of the `kubernetes` package of its release.
                "PYTHONPATH": str(site),
            }
            # The suite reads its YAML files by paths relative to the client's checkout.
            subprocess.run(cmd, cwd=site, env=env, check=False)
            return _outcomes(junit) if junit.exists() else []
        finally:
            if proc is not None:
                proc.terminate()
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--site", type=Path, default=SITE, help="where the suite was fetched")
    parser.add_argument("-k", dest="select", default="", help="pytest -k expression")
    parser.add_argument("--per-test", type=int, default=120, help="seconds before a test is cut")
    parser.add_argument("--json", type=Path, help="also write the outcomes here")
    parser.add_argument("--home", type=Path, help="keep the server's KUBETRAIN_HOME here")
    parser.add_argument(
        "--kubeconfig", type=Path, help="run against this cluster instead of a fresh serve"
    )
    args = parser.parse_args(argv)
    absent = missing(args.site)
    if absent:
        print(
            "the kubernetes client's e2e suite is not here ("
            + ", ".join(absent)
            + "); run `python tools/fetch_upstream.py --client-e2e`",
            file=sys.stderr,
        )
        return 2
    outcomes = run_suite(args.site, args.select, args.per_test, args.home, args.kubeconfig)
    print()
    for o in outcomes:
        print(
            f"{o.result.upper():8} {o.seconds:6.1f}s  {o.test}"
            + (f"  -- {o.reason}" if o.reason else "")
        )
    passed = sum(o.result == "passed" for o in outcomes)
    ran = sum(o.result != "skipped" for o in outcomes)
    print(f"\n{passed} of {ran} passed ({len(outcomes) - ran} skipped)")
    if args.json:
        args.json.write_text(json.dumps([asdict(o) for o in outcomes], indent=1) + "\n")
    return 0 if passed == ran else 1


if __name__ == "__main__":
    sys.exit(main())
