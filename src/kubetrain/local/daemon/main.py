"""The daemon process: API server + controller + executor + status server for one
``KUBETRAIN_HOME``.

Start order: take the lock, start the API server (its data survives in SQLite; it also serves
TokenRequest/TokenReview), write the kubeconfig, start the TrainJobStatus server, start the
executor (which adopts or records whatever the previous daemon's pods did
while no daemon ran), start the controller, and only then write ``daemon.port``: callers wait
for that file. SIGTERM or SIGINT stop everything in reverse order. Pods keep running through a
stop unless the stop request asks to kill them, and the next daemon adopts them.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import fcntl
import hashlib
import json
import logging
import os
import signal
import sys
import time
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kubetrain.kube.client import KubeClient, connect
from kubetrain.local.apiserver import ApiServer

from .files import DaemonFiles

if TYPE_CHECKING:  # pragma: no cover
    from kubetrain.local.executor import Executor, ExecutorSettings
    from kubetrain.local.executor.scheduling import Resources
    from kubetrain.local.statusplane import StatusPlane
    from kubetrain.runtime.config import Environment

__all__ = ["ALREADY_RUNNING", "IMAGES_FILE", "run_daemon", "startup_problem"]

log = logging.getLogger("kubetrain.daemon")

# Exit status of a daemon that found another one holding the lock.
ALREADY_RUNNING = 3
# In KUBETRAIN_HOME: which local environment plays which container image.
IMAGES_FILE = "images.yaml"


def startup_problem(err: BaseException) -> str | None:
    """One line naming the file and the cause, for the errors a start-up can meet from a
    damaged or misconfigured home (None: not one of those, a bug worth its traceback)."""
    import sqlite3

    from kubetrain.local.policy import EngineConfigError
    from kubetrain.local.sandbox import SandboxError

    if isinstance(err, OSError):
        where = err.filename or "start-up"
        return f"{where}: {err.strerror or err}"
    if isinstance(err, (sqlite3.Error, EngineConfigError, SandboxError)):
        return str(err)
    return None


def _take_lock(files: DaemonFiles) -> int | None:
    files.home.mkdir(parents=True, exist_ok=True)
    fd = os.open(files.lock, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def _make_private(home: Path) -> None:
    """Everything this daemon writes is its user's alone: the database (every Secret), keys,
    tokens, pods' volumes and logs. Containers start with a runtime's umask instead
    (`kubetrain.local.sandbox`); a home made by an older version is closed up here."""
    os.umask(0o077)
    home.mkdir(parents=True, exist_ok=True)
    os.chmod(home, 0o700)
    for name in ("apiserver.db", "apiserver.db-wal", "apiserver.db-shm", "kubeconfig"):
        with contextlib.suppress(OSError):
            os.chmod(home / name, 0o600)


def _previous_port(files: DaemonFiles) -> int:
    info = files.read_info() or {}
    port = info.get("port")
    return int(port) if isinstance(port, int) else 0


async def _start_server(
    home: Path,
    port: int,
    host: str = "127.0.0.1",
    api_only: bool = False,
    audit_log: Path | None = None,
) -> ApiServer:
    from kubetrain.api.schema import crd_manifests
    from kubetrain.local.apiserver import protobuf
    from kubetrain.local.apiserver.admission import Admission, ChainAdmission
    from kubetrain.local.apiserver.rbac import user_from_info
    from kubetrain.local.policy import HostPathPolicy, load_engine_config
    from kubetrain.local.tokens import TokenAuthority
    from kubetrain.runtime.admission import TrainerAdmission
    from kubetrain.runtime.config import Environment
    from kubetrain.runtime.defaults import install_defaults
    from kubetrain.runtime.katib import KatibAdmission

    # TokenRequest/TokenReview, as a cluster's API server serves them: pods get bound tokens
    # for the status server, which reviews them here.
    authority = TokenAuthority.for_home(home, protobuf=protobuf.decode)
    engine = load_engine_config(home)

    # Trainer's webhooks, in-process: the same rules the cluster webhook server applies;
    # then Katib's (Experiment defaults and validation, trial pods). Only for the default
    # engine: with --api-only they come, as on a cluster, from the webhook configurations an
    # install stores, which the API server calls (kubetrain.local.apiserver.webhooks).
    # The engine's own policy (no hostPath outside engine.yaml's allowedHostPaths) always.
    in_process: list[Admission] = (
        []
        if api_only
        else [
            TrainerAdmission(environment=Environment(max_num_nodes=engine.max_num_nodes)),
            KatibAdmission(),
        ]
    )

    # Schemas without prose: about a second less per cold start; `kubectl explain` then shows
    # field types without descriptions.
    crds = crd_manifests(descriptions=False)
    from kubetrain.local.lws import LwsDefaulter, lws_crd

    # LWS's CRD and its defaulting webhook's rules: the engine serves LeaderWorkerSets itself.
    crds.append(lws_crd())
    last: OSError | None = None
    # Reuse the last port so kubeconfigs copied elsewhere keep working; any free port otherwise.
    for candidate in dict.fromkeys([port, 0]):
        server = ApiServer(
            home,
            host=host,
            port=candidate,
            crds=crds,
            admission=ChainAdmission([*in_process, LwsDefaulter(), HostPathPolicy(engine)]),
            # What an install holds from its first start: default runtimes, public ConfigMap.
            seed_objects=install_defaults,
            routes=authority.routes(),
            # Service-account tokens for the API server's audience authenticate their pod's
            # service account, which RBAC then authorises (a controller run as a pod).
            authenticator=lambda token: user_from_info(authority.authenticate(token)),
            audit_log=audit_log,
        )
        authority.attach(server.reader)
        try:
            await server.start()
            return server
        except OSError as err:
            last = err
            with contextlib.suppress(Exception):
                await server.close()
    assert last is not None
    raise last


async def run_daemon(
    home: Path,
    *,
    executor_settings: ExecutorSettings | None = None,
    port: int | None = None,
    host: str = "127.0.0.1",
    on_ready: Callable[[ApiServer], None] | None = None,
    api_only: bool = False,
    controller: bool = True,
    audit_log: Path | None = None,
) -> int:
    """Run until SIGTERM/SIGINT; the process exit status.

    ``port`` pins the API server's port (default: the previous daemon's, else a free one);
    ``on_ready`` runs once everything answers (``kubetrain serve`` prints and writes there).
    ``api_only``: the API server alone, without controller, executor or status server, to run
    ``kubetrain controller`` against as in a cluster (two controllers would fight over every
    object they both apply).
    ``controller=False``: the API server and what runs pods (executor, workload and
    LeaderWorkerSet controllers), without the TrainJob and Experiment controllers or the status
    server, and with admission only through stored webhook configurations: a cluster to install
    kubetrain into with ``kubectl apply -k manifests/``.
    ``audit_log``: where the API server writes what RBAC decides (kube-apiserver's
    ``--audit-log-path``).
    """
    files = DaemonFiles(home)
    _make_private(home)
    lock_fd = _take_lock(files)
    if lock_fd is None:
        print(f"kubetrain daemon: another daemon already runs for {home}", file=sys.stderr)
        return ALREADY_RUNNING
    from kubetrain.local.executor.node import load_allocatable

    try:
        # The node's allocatable: the machine's, with <home>/node.yaml's overrides.
        allocatable = load_allocatable(home)
    except ValueError as err:
        print(f"kubetrain daemon: {err}", file=sys.stderr)
        os.close(lock_fd)
        return 2
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    files.clear_ready()
    with contextlib.suppress(OSError):
        files.stop_request.unlink()
    files.write_atomic(files.pid, f"{os.getpid()}\n")
    started = time.time()
    # Without the built-in controller, admission comes from the installed webhook configurations.
    server = await _start_server(
        home,
        _previous_port(files) if port is None else port,
        host,
        api_only or not controller,
        audit_log,
    )
    kubeconfig = server.write_kubeconfig(files.kubeconfig)
    api = connect(kubeconfig)
    plane = None if api_only or not controller else await _start_status_plane(home, kubeconfig)
    executor: Executor | None = None
    if not api_only:
        # Imported only here: `serve --api-only` runs no pods and starts without it.
        from kubetrain.local.executor import Executor

        executor = Executor(
            api, executor_settings or _executor_settings(home, api, plane, allocatable, server)
        )
    controller_task: asyncio.Task[None] | None = None
    katib_task: asyncio.Task[None] | None = None
    lws_task: asyncio.Task[None] | None = None
    workloads_task: asyncio.Task[None] | None = None
    try:
        if executor is not None:
            await executor.start()
            from kubetrain.local.executor.streams import PodStreams

            # kubectl exec / attach / port-forward reach the pods through the kubelet.
            server.serve_pod_streams(PodStreams(executor.kubelet))
            from kubetrain.local.policy import load_engine_config
            from kubetrain.runtime.config import Environment

            if controller:
                base = plane.environment() if plane is not None else Environment()
                limit = load_engine_config(home).max_num_nodes
                environment = dataclasses.replace(base, max_num_nodes=limit)
                controller_task = asyncio.create_task(
                    _run_controller(home, kubeconfig, stop, environment), name="controller"
                )
                from kubetrain.local.katib import run_katib

                katib_task = asyncio.create_task(
                    _keep_running(
                        "Experiment controller", lambda: run_katib(kubeconfig, stop), stop
                    ),
                    name="katib",
                )
            from kubetrain.local.lws import run_lws
            from kubetrain.local.workloads import run_workloads

            lws_task = asyncio.create_task(
                _keep_running(
                    "LeaderWorkerSet controller", lambda: run_lws(kubeconfig, stop), stop
                ),
                name="lws",
            )
            workloads_task = asyncio.create_task(
                _keep_running(
                    "workload controllers", lambda: run_workloads(kubeconfig, stop), stop
                ),
                name="workloads",
            )
        info = {
            "pid": os.getpid(),
            "url": server.url,
            "port": server.port,
            "kubeconfig": str(kubeconfig),
            "startedAt": started,
        }
        files.write_atomic(files.info, json.dumps(info, indent=1))
        files.write_atomic(files.port, f"{server.port}\n")
        if on_ready is not None:
            on_ready(server)
        log.info(
            "kubetrain daemon ready at %s (pid %d, %.2fs)",
            server.url,
            os.getpid(),
            time.time() - started,
        )
        await stop.wait()
    finally:
        files.clear_ready()
        kill_pods = _stop_mode(files) == "kill-pods"
        stop.set()
        for task in (controller_task, katib_task, lws_task, workloads_task):
            if task is not None:
                with contextlib.suppress(asyncio.TimeoutError, Exception):
                    await asyncio.wait_for(task, timeout=5)
        if executor is not None:
            await executor.stop(kill_pods=kill_pods)
        if plane is not None:
            with contextlib.suppress(Exception):
                await plane.close()
        await api.close()
        await server.close()
        with contextlib.suppress(OSError):
            files.stop_request.unlink()
        os.close(lock_fd)
        log.info("kubetrain daemon stopped%s", " (pods killed)" if kill_pods else "")
    return 0


async def _start_status_plane(home: Path, kubeconfig: Path) -> StatusPlane | None:
    from kubetrain.local.statusplane import start_status_plane

    try:
        return await start_status_plane(home, kubeconfig)
    except Exception:
        # Training runs without it; only TrainJobStatus progress reports are lost, and loudly.
        log.exception("the TrainJobStatus server did not start; progress reports will fail")
        return None


def _executor_settings(
    home: Path,
    api: KubeClient,
    plane: StatusPlane | None,
    allocatable: Resources,
    server: ApiServer,
) -> ExecutorSettings:
    from kubetrain.local.executor import ExecutorSettings
    from kubetrain.local.frameworks import (
        engine_overlay,
        initializer_failure,
        local_refusal,
        with_framework_images,
        with_initializer_images,
    )
    from kubetrain.local.frameworks.datacache import with_datacache_images
    from kubetrain.local.policy import host_path_errors, load_engine_config
    from kubetrain.local.sandbox import load_image_map
    from kubetrain.local.statusplane import token_provider

    engine = load_engine_config(home)

    def refusal(pod: Mapping[str, Any], mode: str, why: str) -> str | None:
        # Admission refused these already; a pod stored before the setting changed is not run.
        denied = host_path_errors(pod, engine)
        if denied:
            return str(denied[0])
        return local_refusal(pod, sandbox_mode=mode, mode_reason=why)

    return ExecutorSettings(
        home=home,
        # Image → local environment mapping, read once at start (restart the daemon after edits).
        images=with_datacache_images(
            with_initializer_images(with_framework_images(load_image_map(home / IMAGES_FILE)))
        ),
        token_provider=token_provider(api),
        extra_hosts=plane.hosts() if plane is not None else {},
        overlay=engine_overlay(home),
        refusal=refusal,
        final_failure=initializer_failure,
        allocatable=allocatable,
        api_port=server.port,
        api_ca_pem=server.ca_pem,
    )


def _stop_mode(files: DaemonFiles) -> str:
    try:
        return files.stop_request.read_text().strip()
    except OSError:
        return ""


async def _keep_running(what: str, run: Callable[[], Awaitable[None]], stop: asyncio.Event) -> None:
    """``run()`` until ``stop``; a crash is logged and ``run`` starts again after 1 s.

    For the engine's side controllers (Experiments, LeaderWorkerSets, workloads): none must take
    the TrainJob controller and the pods down with it.
    """
    while not stop.is_set():
        try:
            await run()
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("%s crashed; restarting in 1 s", what)
            await asyncio.sleep(1)


async def _run_controller(
    home: Path, kubeconfig: Path, stop: asyncio.Event, environment: Environment | None
) -> None:
    from kubetrain.controller import LeadershipLost, run_controller

    # The Lease every Trainer controller of an API server takes: a `kubetrain controller`
    # pointed at this server by mistake waits as a follower instead of fighting this one over
    # every object (each would apply its own status-server CA). The identity is stable per
    # home, so a restarted daemon takes its Lease back at once.
    digest = hashlib.sha1(str(home.resolve()).encode(), usedforsecurity=False).hexdigest()
    identity = f"kubetrain-daemon-{digest[:10]}"
    while not stop.is_set():
        try:
            # The environment carries the status server's CA and port into every render.
            await run_controller(
                kubeconfig, stop_event=stop, environment=environment, lease_identity=identity
            )
        except asyncio.CancelledError:
            raise
        except LeadershipLost:
            log.warning("another controller took the Lease of this API server; waiting for it")
        except Exception:
            # The controller must not take the API server and the pods down with it.
            log.exception("controller crashed; restarting in 1 s")
            await asyncio.sleep(1)
