"""Fetch the upstream files some tests compare kubetrain against, from pinned upstream commits.

The test suite checks kubetrain's CRDs, default runtimes and rendered JobSets against upstream's
published Kubeflow Trainer v2.3.0 and JobSet v0.12.0 files. Those files are not part of this
repository; tests that need them skip (naming the missing file) until they are present. This
script downloads each one from its upstream repository at the tagged commit, checks its sha256,
and writes it under ``.upstream/`` at the repository root, where the tests look for them:

    python tools/fetch_upstream.py            # download into .upstream/
    python tools/fetch_upstream.py --verify D # check that folder D holds exactly these files

Standard library only, so it runs before anything is installed.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import urllib.request
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEST = REPO / ".upstream"

TRAINER = ("kubeflow/trainer", "658725bdae5c7e3a0854d93ac6ff492e109a22ab")  # tag v2.3.0
JOBSET = ("kubernetes-sigs/jobset", "f22e565ac3cc3265c7c45ef67ecffdc689af5d77")  # tag v0.12.0


@dataclass(frozen=True)
class Fixture:
    """One upstream file: where the tests read it, where upstream keeps it, and its digest."""

    local: str
    source: tuple[str, str]
    path: str
    sha256: str

    @property
    def url(self) -> str:
        repo, commit = self.source
        return f"https://raw.githubusercontent.com/{repo}/{commit}/{self.path}"


_CRDS = "manifests/base/crds"
_RUNTIMES = "manifests/base/runtimes"
FIXTURES = (
    Fixture(
        "upstream-crds/jobset.x-k8s.io_jobsets.yaml",
        JOBSET,
        "config/components/crd/bases/jobset.x-k8s.io_jobsets.yaml",
        "d022b87624512cf0b6741b31b24a2bea9945b5a838b50713af29332c878bb6fe",
    ),
    Fixture(
        "upstream-crds/trainer.kubeflow.org_clustertrainingruntimes.yaml",
        TRAINER,
        f"{_CRDS}/trainer.kubeflow.org_clustertrainingruntimes.yaml",
        "ec84dc3388fcdbe8c61d3c247a773d14458dd9438e995bea8e50d2a18080eef9",
    ),
    Fixture(
        "upstream-crds/trainer.kubeflow.org_trainingruntimes.yaml",
        TRAINER,
        f"{_CRDS}/trainer.kubeflow.org_trainingruntimes.yaml",
        "69b8dbdf60a18e28cddcc2b8dfc4ce72a943e14b531b9389d593118faee4919f",
    ),
    Fixture(
        "upstream-crds/trainer.kubeflow.org_trainjobs.yaml",
        TRAINER,
        f"{_CRDS}/trainer.kubeflow.org_trainjobs.yaml",
        "a742cafc5b5582640c7e0b7467c024fc237256fbca5ba0a9f0531dfb66d64416",
    ),
    Fixture(
        "upstream-runtimes/deepspeed_distributed.yaml",
        TRAINER,
        f"{_RUNTIMES}/deepspeed_distributed.yaml",
        "f443d4c4b2c0e6a8acdae5381ff2563696b958929217c088e101a7f27bc36827",
    ),
    Fixture(
        "upstream-runtimes/jax_distributed.yaml",
        TRAINER,
        f"{_RUNTIMES}/jax_distributed.yaml",
        "c037b51a8088f26ad673325e3efe9823a61fe250a83f95966644be336f4f835f",
    ),
    Fixture(
        "upstream-runtimes/llama3_2_1B.yaml",
        TRAINER,
        f"{_RUNTIMES}/torchtune/llama3_2/llama3_2_1B.yaml",
        "fda2745c260416344a18a28547d8ba70df4dc8ed55103d46c0c324319eb5bb60",
    ),
    Fixture(
        "upstream-runtimes/llama3_2_3B.yaml",
        TRAINER,
        f"{_RUNTIMES}/torchtune/llama3_2/llama3_2_3B.yaml",
        "fa0d901a6bcde8dd257a0d10f11a28eec32e93efdf6cf7e2279560c7f67e227b",
    ),
    Fixture(
        "upstream-runtimes/mlx_distributed.yaml",
        TRAINER,
        f"{_RUNTIMES}/mlx_distributed.yaml",
        "2c034da061b53b6de8908552867838452e646c0252492b18c9d442d000c55fb0",
    ),
    Fixture(
        "upstream-runtimes/qwen2_5_1.5B.yaml",
        TRAINER,
        f"{_RUNTIMES}/torchtune/qwen2_5/qwen2_5_1.5B.yaml",
        "115dab6c9063aa4662707d09b78e7c7372ff6ac93bc8b81fb5ddcce0fcaf120f",
    ),
    Fixture(
        "upstream-runtimes/torch_distributed.yaml",
        TRAINER,
        f"{_RUNTIMES}/torch_distributed.yaml",
        "c4520df54615d481831d402e644dbeaf77a7a521eae87b2e80fd5f789aac5df2",
    ),
    Fixture(
        "upstream-runtimes/torch_distributed_with_cache.yaml",
        TRAINER,
        f"{_RUNTIMES}/data-cache/torch_distributed_with_cache.yaml",
        "31e7dd2ceef4b6643c8da783fd85b961909e20e68652a537b968e4ae6a9f3372",
    ),
    Fixture(
        "upstream-runtimes/xgboost_distributed.yaml",
        TRAINER,
        f"{_RUNTIMES}/xgboost_distributed.yaml",
        "d2345b16a2043333c31712870c7991e5d3536356be909a9e4dc1e6a7b31e1aca",
    ),
)


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def verify(folder: Path) -> list[str]:
    """What is wrong with ``folder`` as a copy of the fixtures: one line per problem."""
    problems = []
    for fx in FIXTURES:
        path = folder / fx.local
        if not path.is_file():
            problems.append(f"{path}: missing")
        elif _digest(path.read_bytes()) != fx.sha256:
            problems.append(f"{path}: sha256 differs from {fx.source[0]}@{fx.source[1][:12]}")
    return problems


def fetch(dest: Path, timeout: float = 60.0) -> int:
    for fx in FIXTURES:
        target = dest / fx.local
        if target.is_file() and _digest(target.read_bytes()) == fx.sha256:
            continue
        try:
            with urllib.request.urlopen(fx.url, timeout=timeout) as response:
                data: bytes = response.read()
        except OSError as e:
            print(f"fetch_upstream: {fx.url}: {e}", file=sys.stderr)
            return 1
        if _digest(data) != fx.sha256:
            print(
                f"fetch_upstream: {fx.url}: sha256 {_digest(data)} != {fx.sha256}", file=sys.stderr
            )
            return 1
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_suffix(".part")
        tmp.write_bytes(data)
        tmp.replace(target)
        print(f"{fx.local}  <- {fx.source[0]}/{fx.path}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--dest", type=Path, default=DEST, help="where to write (default .upstream/)"
    )
    parser.add_argument("--verify", type=Path, metavar="DIR", help="only check DIR's files")
    args = parser.parse_args(argv)
    if args.verify is not None:
        problems = verify(args.verify)
        for line in problems:
            print(line, file=sys.stderr)
        return 1 if problems else 0
    return fetch(args.dest)


if __name__ == "__main__":
    sys.exit(main())
