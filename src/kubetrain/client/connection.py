"""Which Kubernetes API to talk to: a kubeconfig context, or this machine's local daemon.

The rule, in order: ``--kubeconfig``/``--context`` name a cluster (kubectl's resolution, including
``$KUBECONFIG``); otherwise the local control plane of ``$KUBETRAIN_HOME`` is used and started on
demand. Both paths end in the same client (kubetrain.kube's, behind a thread-safe synchronous
facade), so every operation behaves the same on a laptop and on a cluster. This module imports
the client only inside functions: the CLI builds its parsers from here and must stay fast.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from kubetrain.client.errors import ClientError

if TYPE_CHECKING:
    from kubetrain.kube.sync import SyncKube

__all__ = [
    "LOCAL_CONTEXT",
    "Connection",
    "add_connection_arguments",
    "connect",
    "connect_from_args",
]

LOCAL_CONTEXT = "kubetrain-local"
# The CLI and SDK write with this manager; kubectl's own applies stay separate owners.
FIELD_MANAGER = "kubetrain"


@dataclass
class Connection:
    """A ready client plus the facts commands print: where it points and which namespace."""

    client: SyncKube
    namespace: str
    server: str
    context: str
    local: bool

    def close(self) -> None:
        self.client.close()


def add_connection_arguments(parser: argparse.ArgumentParser, *, namespaced: bool = True) -> None:
    """``--kubeconfig``, ``--context`` and (for namespaced commands) ``-n/--namespace``."""
    group = parser.add_argument_group("connection")
    group.add_argument(
        "--kubeconfig", metavar="PATH", help="kubeconfig file (default: the local kubetrain daemon)"
    )
    group.add_argument(
        "--context", metavar="NAME", help="kubeconfig context (default: the local kubetrain daemon)"
    )
    if namespaced:
        group.add_argument(
            "-n",
            "--namespace",
            metavar="NS",
            help="namespace (default: the context's, else default)",
        )


def connect_from_args(args: argparse.Namespace) -> Connection:
    """:func:`connect` with the options of :func:`add_connection_arguments`."""
    import sys

    def starting(home: Path) -> None:
        # A cold start takes a second or two: say why the first command pauses.
        print(f"starting the local kubetrain daemon ({home})...", file=sys.stderr, flush=True)

    return connect(
        kubeconfig=getattr(args, "kubeconfig", None),
        context=getattr(args, "context", None),
        namespace=getattr(args, "namespace", None),
        on_start=starting,
    )


def _local_kubeconfig(
    home: str | Path | None, on_start: Callable[[Path], None] | None = None
) -> Path:
    """Start (or find) the daemon of ``home`` and return the kubeconfig it wrote."""
    from kubetrain.local.daemon import DaemonError, daemon_status, ensure_daemon

    if on_start is not None:
        status = daemon_status(home)
        if not status.ready:
            on_start(status.home)
    try:
        info = ensure_daemon(home)
    except DaemonError as exc:
        # The first line says what failed; the log tail after it is for `kubetrain daemon status`.
        first = str(exc).split("\n", 1)[0]
        raise ClientError(f"cannot start the local kubetrain daemon: {first}") from None
    return Path(info.kubeconfig)


def connect(
    *,
    kubeconfig: str | os.PathLike[str] | None = None,
    context: str | None = None,
    namespace: str | None = None,
    home: str | Path | None = None,
    timeout: float = 10.0,
    on_start: Callable[[Path], None] | None = None,
) -> Connection:
    """A client for the cluster named by ``kubeconfig``/``context``, else for the local daemon.

    ``on_start`` is called (with the daemon's home) before a local daemon has to be started.
    """
    from lightkube import ConfigError, KubeConfig

    from kubetrain.kube import client as kube
    from kubetrain.kube.sync import SyncKube

    local = kubeconfig is None and context in (None, LOCAL_CONTEXT)
    try:
        if local:
            config = KubeConfig.from_file(_local_kubeconfig(home, on_start)).get(LOCAL_CONTEXT)
        elif kubeconfig is not None:
            config = KubeConfig.from_file(kubeconfig).get(context)
        else:
            config = KubeConfig.from_env().get(context)
    except ConfigError as exc:
        raise ClientError(f"kubeconfig: {exc}") from None
    except KeyError as exc:  # a context naming a cluster or user the file lacks
        raise ClientError(f"kubeconfig: context {context!r} refers to missing {exc}") from None
    if config is None:
        raise ClientError("kubeconfig: no current context; pass --context")
    if config.user is None:
        # A context without a user is valid (kubectl proxy, insecure dev clusters).
        from lightkube.config.models import User

        config = config._replace(user=User())
    ns = namespace or config.namespace or "default"
    try:
        client = SyncKube(lambda: kube.connect(config, timeout=timeout))
    except (ConfigError, OSError, ValueError) as exc:  # certificates, exec plugins
        raise ClientError(f"kubeconfig: {exc}") from None
    return Connection(
        client=client,
        namespace=ns,
        server=str(config.cluster.server),
        context=config.context_name,
        local=local,
    )
