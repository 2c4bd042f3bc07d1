"""Fetch the upstream files some tests compare kubetrain against, from pinned upstream commits.

The test suite checks kubetrain's CRDs, default runtimes and rendered JobSets against upstream's
published Kubeflow Trainer v2.3.0 and JobSet v0.12.0 files. Those files are not part of this
repository; tests that need them skip (naming the missing file) until they are present. This
script downloads each one from its upstream repository at the tagged commit, checks its sha256,
and writes it under ``.upstream/`` at the repository root, where the tests look for them:

    python tools/fetch_upstream.py            # download into .upstream/
    python tools/fetch_upstream.py --verify D # check that folder D holds exactly these files
    python tools/fetch_upstream.py --client-e2e  # the kubernetes client's e2e suite (+ its wheel)

``--from-git DIR`` reads the files from a local clone of the upstream repository instead of
GitHub (offline machines); the digests are checked all the same.

Standard library only, so it runs before anything is installed.
"""

from __future__ import annotations

import argparse
import hashlib
import subprocess
import sys
import tempfile
import urllib.request
import zipfile
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


# The official Kubernetes Python client's own end-to-end suite (kubernetes/e2e_test and
# kubernetes/aio/e2e_test), run unchanged against `kubetrain serve` by
# benchmarks/kube_client_e2e.py. The suite imports itself as part of the `kubernetes` package,
# so it goes next to that release's wheel, unpacked into one folder (CLIENT_SITE).
KUBE_CLIENT = ("kubernetes-client/python", "67e7d9abfc6fe6629fa650d9b0abf4c99ef8c39c")  # v36.0.3
KUBE_CLIENT_WHEEL = (
    "kubernetes",
    "36.0.3",
    "kubernetes-36.0.3-py2.py3-none-any.whl",
    "8fde9241c4b298e6374a069dcf728359b4e72c2fb29489a975ba4e1c047cf10f",
)
CLIENT_SITE = "kubernetes-client/site"
_CLIENT_E2E_FILES = (
    # kubernetes.aio.utils, which the aio suite imports, is missing from the v36.0.3 wheel.
    (
        "kubernetes/aio/utils/__init__.py",
        "af1a40c021ce3f460633bfa29974ca8fabcbb5408851609176073e78ceb4eb7f",
    ),
    (
        "kubernetes/aio/utils/create_from_yaml.py",
        "ce329185ffd5aaa017da3c1ad4ce53285ef642b0f7d20dcfffcf20edb925f044",
    ),
    (
        "kubernetes/aio/e2e_test/__init__.py",
        "cdf0d9a70cc5a3348f1e5e2550e53c3f412ac594b63aaa7dd6708795fb7638ba",
    ),
    (
        "kubernetes/aio/e2e_test/base.py",
        "3e89c24032fe04a366cc2436d17fa49aaf0b9b6951f6c9914ce3df75287a3f00",
    ),
    (
        "kubernetes/aio/e2e_test/test_api.py",
        "064526a3386aa12f6ed6d526102c56cf565def74a6306f108019beb832404570",
    ),
    (
        "kubernetes/aio/e2e_test/test_apply_patch.py",
        "e8fd25fcae0446803195b3fc69cf4801a330619543d8896ca3eed0b26224598b",
    ),
    (
        "kubernetes/aio/e2e_test/test_batch.py",
        "f0ad225f6140d5f177ff8d932de595041ebbf30c366c8f47c0f8d6e101fa766b",
    ),
    (
        "kubernetes/e2e_test/__init__.py",
        "3886885607d89d6edce1abc3bc22d92ebae99ffcffdec850ba1b760586e02437",
    ),
    (
        "kubernetes/e2e_test/base.py",
        "3325e05b9c6a47c3e6c77814d06c5f065b1511f7977e4f44928fd88e7e3c2524",
    ),
    (
        "kubernetes/e2e_test/port_server.py",
        "7dd4540d92b962c107cea1b776c787424a66582bd81521a9aae3c6802834a8a8",
    ),
    (
        "kubernetes/e2e_test/test_apps.py",
        "40268a8d344d0d3ee05b0dea24e842c209fd5969d63fb11cad02508822b892b4",
    ),
    (
        "kubernetes/e2e_test/test_batch.py",
        "c2fe952e3cb136637f1b3866caf8de1454eebd0b358b6874cf814cf8ae352ab6",
    ),
    (
        "kubernetes/e2e_test/test_client.py",
        "272a81d434eae37a7257d774e677435649b4b637c7574999cd53684d8358a521",
    ),
    (
        "kubernetes/e2e_test/test_informer.py",
        "f0f15fd0728f9e20da29e5e894f184c238cfad5b7d5d17e98e908a6d84891eac",
    ),
    (
        "kubernetes/e2e_test/test_utils.py",
        "5ce86d2cd76556601d9367dc44d46e47ef9e55cecb4051798b81a98c2f35b8bb",
    ),
    (
        "kubernetes/e2e_test/test_watch.py",
        "b02dd2d684b32ea4692d7e78ca45d147705f7854aa80f2189c73b95def9b1177",
    ),
    (
        "kubernetes/e2e_test/test_yaml/api-service.yaml",
        "f02fc9a7d3940921c34fcfcd1a46784e12eb3c12465c66e40e0ff0d864b99637",
    ),
    (
        "kubernetes/e2e_test/test_yaml/apps-deployment-2.yaml",
        "366df17deb3b270257deffb9b55b417fc249a57afd4733ee92559239bd86f66d",
    ),
    (
        "kubernetes/e2e_test/test_yaml/apps-deployment.yaml",
        "73a9bc85110c82515621719dca3532ee81b04718284408a683a839be3109f790",
    ),
    (
        "kubernetes/e2e_test/test_yaml/core-namespace.yaml",
        "15bd27ea5f24cc1590614e322222c7fba89c734043dce89f3162adc7f7a594f6",
    ),
    (
        "kubernetes/e2e_test/test_yaml/core-pod.yaml",
        "ce399d19577e01537dca1a88d2738cabea0f293557fef4335bee11bfc27466cd",
    ),
    (
        "kubernetes/e2e_test/test_yaml/core-service.yaml",
        "45ac876092f5f2d46f76ed785025122a4fb4b752c1ed86b090cdaa9d2d84fb24",
    ),
    (
        "kubernetes/e2e_test/test_yaml/dep-deployment.yaml",
        "0ec6ab93d138cbfbd9676285c9c58e8bc4285df010b44c9cf7e1d7397e40d194",
    ),
    (
        "kubernetes/e2e_test/test_yaml/dep-namespace.yaml",
        "34e4d87fbd3f44e5b190f16f91b708f531f42709b50076acd28d2311617cb093",
    ),
    (
        "kubernetes/e2e_test/test_yaml/implicit-svclist.json",
        "d808528d340f1b13534b56f7b9cb3a4404aec532ab80ecc0545c9f1e894935f2",
    ),
    (
        "kubernetes/e2e_test/test_yaml/list.yaml",
        "475ba55fd317981f3b8dc0bc046e25eb43dc7b689e5b9291a7610762789ec8b4",
    ),
    (
        "kubernetes/e2e_test/test_yaml/multi-resource-with-list.yaml",
        "3698f0f5497d073510515e2c7915273aa52b478da2ecc8ebe5f55e02ae6b4fb5",
    ),
    (
        "kubernetes/e2e_test/test_yaml/multi-resource.yaml",
        "5edbfe5ecda7f0848b6bad354f6e4a74447d7555b295a01e534b06f2ca80d752",
    ),
    (
        "kubernetes/e2e_test/test_yaml/multi-resource/multi-resource-replication-controller.yaml",
        "9a74b08fad0d5dea041cd61c44656ea64d7981ed3c5ab4663567b47a0c0b0b44",
    ),
    (
        "kubernetes/e2e_test/test_yaml/multi-resource/multi-resource-service.yaml",
        "b736da44dd033e29e502fb3903e39fc2f06af9ce73f7bc6212b0051965917e6e",
    ),
    (
        "kubernetes/e2e_test/test_yaml/namespace-list.yaml",
        "6c8e2fac476ba6570f905de75bbf9ee7359f1793bc4a39ace87a02b12ed2e966",
    ),
    (
        "kubernetes/e2e_test/test_yaml/rbac-role.yaml",
        "fefbb23c96b21ef575bdeecb11b9fb0722b81509d50ac44c2515cb3993d35551",
    ),
    (
        "kubernetes/e2e_test/test_yaml/triple-nginx.yaml",
        "536d607b48fb71f729042008a5cf0b8ab3f7a585e582b2c42936bcaa05ab08b9",
    ),
    (
        "kubernetes/e2e_test/test_yaml/yaml-conflict-first.yaml",
        "a4413c052eac7293d2dddc8aab1bab1d0cf6d99ede26e14ea98d66340ff09f36",
    ),
    (
        "kubernetes/e2e_test/test_yaml/yaml-conflict-multi.yaml",
        "b342b4ac853c22d6a09d7a01bcb4842c4ffb492ffc09c9931b33af6ae29552c7",
    ),
)
CLIENT_E2E = tuple(
    Fixture(f"{CLIENT_SITE}/{path}", KUBE_CLIENT, path, digest)
    for path, digest in _CLIENT_E2E_FILES
)


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def verify(folder: Path, fixtures: tuple[Fixture, ...] = FIXTURES) -> list[str]:
    """What is wrong with ``folder`` as a copy of ``fixtures``: one line per problem."""
    problems = []
    for fx in fixtures:
        path = folder / fx.local
        if not path.is_file():
            problems.append(f"{path}: missing")
        elif _digest(path.read_bytes()) != fx.sha256:
            problems.append(f"{path}: sha256 differs from {fx.source[0]}@{fx.source[1][:12]}")
    return problems


def _download(fx: Fixture, timeout: float, git_dir: Path | None) -> bytes:
    if git_dir is not None:
        # An offline copy of the upstream repository (a bare clone or mirror) holding the commit.
        done = subprocess.run(
            ["git", "--git-dir", str(git_dir), "show", f"{fx.source[1]}:{fx.path}"],
            capture_output=True,
            check=False,
        )
        if done.returncode != 0:
            raise OSError(done.stderr.decode(errors="replace").strip())
        return done.stdout
    with urllib.request.urlopen(fx.url, timeout=timeout) as response:
        data: bytes = response.read()
    return data


def fetch(
    dest: Path,
    timeout: float = 60.0,
    fixtures: tuple[Fixture, ...] = FIXTURES,
    git_dir: Path | None = None,
) -> int:
    for fx in fixtures:
        target = dest / fx.local
        if target.is_file() and _digest(target.read_bytes()) == fx.sha256:
            continue
        where = f"{git_dir}:{fx.path}" if git_dir is not None else fx.url
        try:
            data = _download(fx, timeout, git_dir)
        except OSError as e:
            print(f"fetch_upstream: {where}: {e}", file=sys.stderr)
            return 1
        if _digest(data) != fx.sha256:
            print(
                f"fetch_upstream: {where}: sha256 {_digest(data)} != {fx.sha256}", file=sys.stderr
            )
            return 1
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_suffix(".part")
        tmp.write_bytes(data)
        tmp.replace(target)
        print(f"{fx.local}  <- {fx.source[0]}/{fx.path}")
    return 0


def fetch_client_wheel(dest: Path) -> int:
    """Unpack the pinned ``kubernetes`` wheel (from PyPI, by pip) into ``dest/CLIENT_SITE``."""
    name, version, filename, sha256 = KUBE_CLIENT_WHEEL
    site = dest / CLIENT_SITE
    marker = site / f"{filename}.sha256"
    if marker.is_file() and marker.read_text().strip() == sha256:
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        done = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:",
             f"{name}=={version}", "-d", tmp],
            check=False,
        )  # fmt: skip
        wheel = Path(tmp) / filename
        if done.returncode != 0 or not wheel.is_file():
            print(f"fetch_upstream: pip could not download {name}=={version}", file=sys.stderr)
            return 1
        if _digest(wheel.read_bytes()) != sha256:
            print(f"fetch_upstream: {filename}: sha256 differs from {sha256}", file=sys.stderr)
            return 1
        site.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(wheel) as archive:
            archive.extractall(site)
    marker.write_text(sha256 + "\n")
    print(f"{CLIENT_SITE}  <- {filename} (PyPI)")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--dest", type=Path, default=DEST, help="where to write (default .upstream/)"
    )
    parser.add_argument("--verify", type=Path, metavar="DIR", help="only check DIR's files")
    parser.add_argument(
        "--client-e2e",
        action="store_true",
        help="fetch the kubernetes client's e2e suite and its wheel instead of the CRDs",
    )
    parser.add_argument(
        "--from-git",
        type=Path,
        metavar="GIT_DIR",
        help="read upstream files from a local clone of their repository instead of GitHub",
    )
    args = parser.parse_args(argv)
    fixtures = CLIENT_E2E if args.client_e2e else FIXTURES
    if args.verify is not None:
        problems = verify(args.verify, fixtures)
        for line in problems:
            print(line, file=sys.stderr)
        return 1 if problems else 0
    if args.client_e2e:
        return fetch_client_wheel(args.dest) or fetch(
            args.dest, fixtures=fixtures, git_dir=args.from_git
        )
    return fetch(args.dest, git_dir=args.from_git)


if __name__ == "__main__":
    sys.exit(main())
