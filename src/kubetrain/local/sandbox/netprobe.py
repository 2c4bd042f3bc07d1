"""One httpGet or tcpSocket probe; also a script (``python -I netprobe.py http|tcp ...``) that
the kubelet runs inside a pod's network namespace, where the pod's ports are.

Standard library only and no kubetrain imports: it runs under ``-I`` from its file path.
Exit code 0 = success, 1 = failure (the reason on stderr).
"""

from __future__ import annotations

import http.client
import socket
import ssl
import sys

__all__ = ["check_http", "check_tcp"]


def check_tcp(host: str, port: int, timeout: float) -> str | None:
    """None when a TCP connection opens, else why not."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return None
    except OSError as err:
        return f"dial tcp {host}:{port}: {err}"


def check_http(
    host: str, port: int, path: str, scheme: str, timeout: float, headers: dict[str, str]
) -> str | None:
    """None for a 2xx/3xx answer (the kubelet's rule), else why not. HTTPS certificates are not
    checked, as the kubelet does not check them."""
    conn: http.client.HTTPConnection
    if scheme.upper() == "HTTPS":
        conn = http.client.HTTPSConnection(
            host, port, timeout=timeout, context=ssl._create_unverified_context()
        )
    else:
        conn = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        conn.request("GET", path or "/", headers={"User-Agent": "kube-probe/1.31", **headers})
        status = conn.getresponse().status
    except (OSError, http.client.HTTPException) as err:
        return f'Get "{scheme.lower()}://{host}:{port}{path}": {err}'
    finally:
        conn.close()
    if 200 <= status < 400:
        return None
    return f"HTTP probe failed with statuscode: {status}"


def _main(argv: list[str]) -> int:
    kind, host, port, timeout = argv[0], argv[1], int(argv[2]), float(argv[3])
    if kind == "tcp":
        why = check_tcp(host, port, timeout)
    else:
        path, scheme = argv[4], argv[5]
        headers = dict(h.split(":", 1) for h in argv[6:])
        why = check_http(host, port, path, scheme, timeout, headers)
    if why:
        print(why, file=sys.stderr)
    return 1 if why else 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
