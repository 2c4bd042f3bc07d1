"""Running ``kubetrain dashboard`` as users do (its own process) and talking to it over HTTP."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# A kubeconfig whose API server is not there (the discard port): the dashboard starts, its
# watches fail, and everything before the API (token, CSRF, Host checks) still answers.
DEAD_KUBECONFIG = """\
apiVersion: v1
kind: Config
clusters: [{name: gone, cluster: {server: "https://127.0.0.1:9"}}]
users: [{name: me, user: {token: abc}}]
contexts: [{name: gone, context: {cluster: gone, user: me}}]
current-context: gone
"""


@dataclass
class Dashboard:
    proc: subprocess.Popen[str]
    url: str  # with the token

    @property
    def base(self) -> str:
        return self.url.split("/?", 1)[0]

    @property
    def token(self) -> str:
        return self.url.rsplit("token=", 1)[1]


def kubetrain(home: Path, *argv: str, **popen: Any) -> subprocess.Popen[str]:
    env = {**os.environ, "KUBETRAIN_HOME": str(home)}
    return subprocess.Popen(
        [sys.executable, "-m", "kubetrain.cli.main", *argv],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **popen,
    )


def start_dashboard(home: Path, *flags: str) -> Dashboard:
    proc = kubetrain(home, "dashboard", *flags)
    lines: queue.Queue[str] = queue.Queue()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line)

    threading.Thread(target=read, daemon=True).start()
    try:
        lines.get(timeout=30)  # "kubetrain dashboard (...) for <server>"
        url = lines.get(timeout=30).strip()
    except queue.Empty:
        proc.kill()
        proc.wait()
        raise AssertionError(
            f"no URL from kubetrain dashboard: {proc.stderr.read() if proc.stderr else ''}"
        ) from None
    assert url.startswith("http://127.0.0.1:"), url
    return Dashboard(proc, url)


def request(
    dash: Dashboard, path: str, *, method: str = "GET", headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], str]:
    req = urllib.request.Request(dash.base + path, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=10) as res:
            return res.status, dict(res.headers), res.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read().decode()


def csrf(dash: Dashboard) -> str:
    _, _, body = request(dash, "/api/session", headers={"Authorization": f"Bearer {dash.token}"})
    return str(json.loads(body)["csrf"])


def stop(dash: Dashboard) -> None:
    dash.proc.terminate()
    dash.proc.communicate(timeout=10)
