"""A STAND-IN for the Hugging Face Hub, for tests only: the four routes that
``huggingface_hub.snapshot_download`` calls, served from memory on loopback.

It is not a Hub and implements nothing else: no uploads, no search, no xet, no LFS
redirects, one revision per repository. Point ``HF_ENDPOINT`` at `HubStandIn.endpoint`.

- ``GET  /api/{models|datasets}/{repo}/revision/{rev}``: the repo's commit and file names;
- ``GET  /api/{models|datasets}/{repo}/tree/{rev}[/...]``: the file list (sizes, blob ids);
- ``HEAD|GET /[datasets/]{repo}/resolve/{rev}/{file}``: a file's commit, ETag, size, bytes.

A repository with a ``token`` answers 401 with ``X-Error-Code: RepoNotFound`` to any
other bearer token, as the Hub does for private repositories; an unknown repository the same.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any
from urllib.parse import unquote, urlparse

__all__ = ["HubRepo", "HubStandIn"]


@dataclass
class HubRepo:
    files: dict[str, bytes]
    token: str | None = None
    sha: str = field(init=False)

    def __post_init__(self) -> None:
        digest = hashlib.sha1(usedforsecurity=False)
        for name in sorted(self.files):
            digest.update(name.encode() + b"\0" + self.files[name])
        self.sha = digest.hexdigest()


_API = re.compile(r"^/api/(models|datasets)/(.+?)/(revision|tree)/([^/]+)(?:/.*)?$")
_RESOLVE = re.compile(r"^/(datasets/)?(.+?)/resolve/([^/]+)/(.+)$")


class HubStandIn:
    """Serves ``repos`` (``("model" | "dataset", "org/name")`` → `HubRepo`) until closed;
    ``requests`` counts file downloads (GET on resolve) per file name."""

    def __init__(self, repos: dict[tuple[str, str], HubRepo]) -> None:
        self.repos = repos
        self.requests: dict[str, int] = {}
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                stand_in._handle(self, body=True)

            def do_HEAD(self) -> None:
                stand_in._handle(self, body=False)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> HubStandIn:
        self._thread.start()
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _repo(self, h: BaseHTTPRequestHandler, kind: str, name: str) -> HubRepo | None:
        repo = self.repos.get((kind, name))
        auth = h.headers.get("Authorization", "")
        if repo is None or (repo.token is not None and auth != f"Bearer {repo.token}"):
            self._send(
                h, 401, b'{"error":"Repository Not Found"}', {"X-Error-Code": "RepoNotFound"}
            )
            return None
        return repo

    def _handle(self, h: BaseHTTPRequestHandler, *, body: bool) -> None:
        path = unquote(urlparse(h.path).path)
        if m := _API.match(path):
            kind = "model" if m[1] == "models" else "dataset"
            repo = self._repo(h, kind, m[2])
            if repo is None:
                return
            if m[3] == "revision":
                data: Any = {
                    "id": m[2],
                    "sha": repo.sha,
                    "siblings": [{"rfilename": n} for n in sorted(repo.files)],
                }
            else:
                data = [
                    {"type": "file", "path": n, "size": len(b), "oid": _etag(b)}
                    for n, b in sorted(repo.files.items())
                ]
            self._send(
                h, 200, json.dumps(data).encode(), {"Content-Type": "application/json"}, body
            )
        elif m := _RESOLVE.match(path):
            repo = self._repo(h, "dataset" if m[1] else "model", m[2])
            if repo is None:
                return
            content = repo.files.get(m[4])
            if content is None:
                self._send(h, 404, b"", {"X-Error-Code": "EntryNotFound"}, body)
                return
            if body:
                self.requests[m[4]] = self.requests.get(m[4], 0) + 1
            headers = {"X-Repo-Commit": repo.sha, "ETag": f'"{_etag(content)}"'}
            self._send(h, 200, content, headers, body)
        else:
            self._send(h, 404, b"", {}, body)

    @staticmethod
    def _send(
        h: BaseHTTPRequestHandler,
        status: int,
        data: bytes,
        headers: dict[str, str],
        body: bool = True,
    ) -> None:
        h.send_response(status)
        for k, v in headers.items():
            h.send_header(k, v)
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        if body:
            h.wfile.write(data)


def _etag(content: bytes) -> str:
    return hashlib.sha1(content, usedforsecurity=False).hexdigest()
