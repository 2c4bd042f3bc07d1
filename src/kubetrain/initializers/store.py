"""Where fetched files land: straight in the output directory, or through a cache shared by
every run that names the same cache directory (the local engine's, across TrainJobs).

A file is written as ``<name>.part`` and renamed when complete, so a killed run never leaves a
truncated file under its real name, and a rerun fetches only what is missing: an object whose
cache entry exists (or, without a cache, whose output file exists with the recorded identity)
is not fetched again. Cache entries are keyed by the object's identity (source, key, ETag or
revision, size), never by its name alone, so a changed object is fetched anew.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import threading
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["MANIFEST", "Store"]

# Identity of each file written without a cache, for resuming: one JSON line per completed
# file, ``[output-relative path, identity]``, appended as files complete (a batch at a time: a
# run killed in between fetches that batch again).
MANIFEST = ".kubetrain-initializer.jsonl"


@dataclass
class Store:
    output: Path
    cache: Path | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __post_init__(self) -> None:
        self.output.mkdir(parents=True, exist_ok=True)
        if self.cache is None:
            # Partial files of a run that was killed: this run writes its own.
            for stale in self.output.rglob("*.part"):
                stale.unlink(missing_ok=True)
        self._manifest_path = self.output / MANIFEST
        self._manifest: dict[str, str] = {}
        self._dirs: set[Path] = set()  # made already: one mkdir per directory, not per file
        try:
            lines = self._manifest_path.read_text().splitlines()
        except OSError:
            lines = []
        for line in lines:
            try:
                rel, identity = json.loads(line)
            except ValueError:
                continue  # a line cut short by a kill: that file is fetched again
            self._manifest[str(rel)] = str(identity)

    def _entry(self, identity: str) -> Path:
        assert self.cache is not None
        digest = hashlib.sha256(identity.encode()).hexdigest()
        return self.cache / "objects" / digest[:2] / digest

    def have(self, rel: str, identity: str) -> bool:
        """True when the file needs no fetch; puts it in place from the cache if need be."""
        dest = self.output / rel
        if self.cache is not None:
            entry = self._entry(identity)
            if not entry.is_file():
                return False
            self._place(entry, dest)
            return True
        return self._manifest.get(rel) == identity and dest.is_file()

    def _final(self, rel: str, identity: str) -> Path:
        return self._entry(identity) if self.cache is not None else self.output / rel

    def target(self, rel: str, identity: str) -> Path:
        """The ``.part`` path to write the file to, its directory created. The name is the
        writer's own, so two jobs fetching one object into the cache never share a file."""
        final = self._final(rel, identity)
        if final.parent not in self._dirs:
            final.parent.mkdir(parents=True, exist_ok=True)
            self._dirs.add(final.parent)
        return final.with_name(f"{final.name}.{os.getpid()}-{threading.get_ident()}.part")

    def commit(self, files: list[tuple[str, str, Path]]) -> None:
        """Each ``(rel, identity, part)``: ``part`` is complete, so it gets its name (and is
        copied out of the cache); the manifest is written once for them all."""
        for rel, identity, part in files:
            final = self._final(rel, identity)
            os.replace(part, final)
            if self.cache is not None:
                self._place(final, self.output / rel)
        if self.cache is None and files:
            lines = "".join(json.dumps([rel, identity]) + "\n" for rel, identity, _ in files)
            with self._lock, self._manifest_path.open("a") as f:
                f.write(lines)

    def place(self, source: Path, rel: str) -> None:
        """Copy a complete file from elsewhere in the cache to ``rel`` in the output."""
        self._place(source, self.output / rel)

    def _place(self, entry: Path, dest: Path) -> None:
        # A copy, not a link: training code that edits its dataset in place must not change
        # what the next TrainJob gets from the cache.
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = dest.with_name(dest.name + ".part")
        shutil.copyfile(entry, tmp)
        os.replace(tmp, dest)
