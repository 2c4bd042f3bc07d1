"""``hf://`` sources through ``huggingface_hub.snapshot_download``.

With a cache directory the snapshot lands in the shared Hugging Face cache there (the Hub's
own content-addressed layout: a file already there is never fetched again, and with
``HF_HUB_OFFLINE=1`` the cache alone serves it) and is copied into the output; without one it
is fetched straight into the output directory, where huggingface_hub resumes an interrupted
download. ``HF_ENDPOINT`` (huggingface_hub's own variable) points it at another Hub.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Iterator
from pathlib import Path

from .config import Config, InitializerError
from .meter import Meter, human
from .select import selected
from .store import Store

__all__ = ["fetch_hf"]

log = logging.getLogger("kubetrain.initializers")


def _cause(err: Exception, cfg: Config) -> str:
    from huggingface_hub import constants
    from huggingface_hub.errors import (
        GatedRepoError,
        HfHubHTTPError,
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    kind = "dataset" if cfg.kind == "dataset" else "model"
    if isinstance(err, GatedRepoError):
        return f"gated {kind} repository {cfg.location!r}: the token (ACCESS_TOKEN) has no access"
    if isinstance(err, RepositoryNotFoundError):
        who = "with this token (ACCESS_TOKEN)" if cfg.access_token else "without a token"
        return (
            f"{kind} repository {cfg.location!r} not found on {constants.ENDPOINT}, "
            f"or not visible {who}"
        )
    if isinstance(err, RevisionNotFoundError):
        return f"{kind} repository {cfg.location!r} has no such revision"
    if isinstance(err, LocalEntryNotFoundError):
        return (
            f"{kind} repository {cfg.location!r} is not in the local cache and the Hub at "
            f"{constants.ENDPOINT} cannot be reached (offline: {constants.HF_HUB_OFFLINE})"
        )
    if isinstance(err, HfHubHTTPError):
        status = err.response.status_code if err.response is not None else "?"
        if status == 401:
            return "the Hub rejected the token (ACCESS_TOKEN)"
        return f"the Hub answered HTTP {status}: {str(err).splitlines()[0]}"
    first = str(err).splitlines()[0] if str(err) else ""
    return f"{type(err).__name__}: {first}"


def _blobs(folder: Path) -> set[str]:
    try:
        return set(os.listdir(folder / "blobs"))
    except OSError:
        return set()


def _bytes_below(folder: Path) -> int:
    total = 0
    for root, _, names in os.walk(folder):
        for name in names:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(root, name)).st_size
    return total


def _total(cfg: Config, repo_type: str) -> int:
    """Bytes the selection holds (0 when the Hub cannot say, e.g. offline)."""
    from huggingface_hub import HfApi
    from huggingface_hub.hf_api import RepoFile

    try:
        tree = HfApi(token=cfg.access_token).list_repo_tree(
            cfg.location, recursive=True, repo_type=repo_type
        )
        return sum(
            int(f.size)
            for f in tree
            if isinstance(f, RepoFile)
            and selected(f.path, allow=cfg.allow_patterns, ignore=cfg.ignore_patterns)
        )
    except Exception:
        return 0  # snapshot_download says what is wrong, in its own words


@contextlib.contextmanager
def _metered(folder: Path, total: int) -> Iterator[None]:
    """Bytes appearing below ``folder`` count as fetched (huggingface_hub writes them there)."""
    if total <= 0:
        yield
        return
    start = _bytes_below(folder)
    stop = threading.Event()
    with Meter(total) as meter:

        def poll() -> None:
            while not stop.wait(1.0):
                meter.add(max(0, _bytes_below(folder) - start) - meter.done)

        thread = threading.Thread(target=poll, name="hf-meter", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join()
            meter.add(max(0, _bytes_below(folder) - start) - meter.done)


def fetch_hf(cfg: Config, store: Store, *, concurrency: int = 8) -> None:
    from huggingface_hub import constants, snapshot_download
    from huggingface_hub.file_download import repo_folder_name

    repo_type = "dataset" if cfg.kind == "dataset" else "model"
    allow = list(cfg.allow_patterns) or None
    ignore = list(cfg.ignore_patterns) or None
    log.info("fetching %s %s from %s", repo_type, cfg.location, constants.ENDPOINT)
    total = 0 if constants.HF_HUB_OFFLINE else _total(cfg, repo_type)
    try:
        if store.cache is None:
            with _metered(store.output, total):
                snapshot_download(
                    cfg.location, repo_type=repo_type, local_dir=store.output,
                    token=cfg.access_token, allow_patterns=allow, ignore_patterns=ignore,
                    max_workers=concurrency,
                )  # fmt: skip
            return
        cache_dir = store.cache / "hf"
        folder = cache_dir / repo_folder_name(repo_id=cfg.location, repo_type=repo_type)
        before = _blobs(folder)
        with _metered(folder / "blobs", total):
            where = snapshot_download(
                cfg.location, repo_type=repo_type, cache_dir=cache_dir, token=cfg.access_token,
                allow_patterns=allow, ignore_patterns=ignore, max_workers=concurrency,
            )  # fmt: skip
        snapshot = Path(where)
    except Exception as err:
        raise InitializerError(cfg.storage_uri, _cause(err, cfg)) from err
    fetched = len(_blobs(folder) - before)
    files = [p for p in sorted(snapshot.rglob("*")) if p.is_file()]
    size = 0
    for path in files:
        rel = path.relative_to(snapshot).as_posix()
        size += path.stat().st_size
        store.place(path.resolve(), rel)
    if fetched == 0:
        log.info("cache hit: all %d files (%s) were in the cache", len(files), human(size))
    else:
        log.info(
            "fetched %d new files; cache hit for %d of %d (%s in all)",
            fetched, len(files) - fetched, len(files), human(size),
        )  # fmt: skip
