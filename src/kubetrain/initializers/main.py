"""One initializer run: env in, files out, one line on failure."""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from .config import DEFAULT_OUTPUT, InitializerError, Kind, read_config
from .store import Store

__all__ = ["CACHE_ENV", "TERMINATION_LOG", "main", "run"]

log = logging.getLogger("kubetrain.initializers")

# The local engine points this at a directory shared by every TrainJob of the same namespace.
CACHE_ENV = "KUBETRAIN_INITIALIZER_CACHE"
# Where the kubelet reads a container's termination message (terminationMessagePath default).
TERMINATION_LOG = Path("/dev/termination-log")


def run(kind: Kind, env: Mapping[str, str], output: Path, cache: Path | None = None) -> None:
    """Fetch what ``env`` names into ``output``; `InitializerError` says why not."""
    cfg = read_config(kind, env)
    if cfg.scheme == "cache":
        from .cache import run_cache

        run_cache(cfg, env)  # the cache serves the rows: nothing is written to ``output``
        log.info("the data cache for %s is ready", cfg.storage_uri)
        return
    store = Store(output, cache)
    try:
        if cfg.scheme == "s3":
            from .s3 import fetch_s3

            fetch_s3(cfg, store)
        else:
            from .hf import fetch_hf

            fetch_hf(cfg, store)
    except InitializerError:
        raise
    except OSError as err:
        raise InitializerError(cfg.storage_uri, f"cannot write {output}: {err}") from err
    log.info("%s is ready in %s", kind, output)


def _terminate_with(message: str, path: Path) -> None:
    # Only where the kubelet made the file: a plain process must not create one in the host's /dev.
    if path.is_file():
        with contextlib.suppress(OSError):
            path.write_text(message)


def main(argv: Sequence[str] | None = None, *, termination_log: Path = TERMINATION_LOG) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m kubetrain.initializers",
        description="Fetch a dataset or model into the TrainJob's shared volume "
        "(upstream's initializer env contract: STORAGE_URI, ACCESS_TOKEN, IGNORE_PATTERNS, "
        "ENDPOINT, ACCESS_KEY_ID, SECRET_ACCESS_KEY, REGION).",
    )
    parser.add_argument("kind", choices=["dataset", "model"])
    parser.add_argument("--output", type=Path, help="default: /workspace/<kind>")
    args = parser.parse_args(argv)
    logging.basicConfig(
        format="%(asctime)s %(levelname)s %(message)s", level=logging.INFO, stream=sys.stdout
    )
    # huggingface_hub's progress bars and every HTTP request of its client are noise in a
    # pod log (the meter and the summary lines say what happened).
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    for name in ("httpx", "httpx2", "botocore", "urllib3"):
        logging.getLogger(name).setLevel(logging.WARNING)
    kind: Kind = args.kind
    output = args.output or Path(DEFAULT_OUTPUT[kind])
    cache = Path(os.environ[CACHE_ENV]) if os.environ.get(CACHE_ENV) else None
    try:
        run(kind, os.environ, output, cache)
    except InitializerError as err:
        message = f"{kind} initializer failed: {err}"
        log.error("%s", message)
        _terminate_with(message, termination_log)
        return 1
    except Exception as err:  # one line for the pod's status, never a traceback
        uri = os.environ.get("STORAGE_URI", "")
        message = f"{kind} initializer failed: {uri}: {type(err).__name__}: {err}"
        log.error("%s", message)
        _terminate_with(message, termination_log)
        return 1
    return 0
