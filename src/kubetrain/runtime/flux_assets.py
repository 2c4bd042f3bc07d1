"""What the Flux plugin writes next to the JobSet (trainer v2.3.0 pkg/runtime/framework/plugins/flux/flux.go): two scripts and a CURVE cert.

- ``<trainjob>-flux-entrypoint`` ConfigMap: ``init.sh`` runs in the ``flux-installer`` init
  container (the flux-view image) and stages Flux plus its broker configuration into the shared
  ``/mnt/flux`` volume; ``entrypoint.sh`` wraps the trainer command in the ``node`` container:
  the pod whose hostname is ``<trainjob>-node-0-0`` starts the lead broker and runs the command
  under ``flux run``, every other pod runs a follower broker until the lead one is done.
- ``<trainjob>-flux-curve`` Secret: a ZeroMQ CURVE certificate whose secret key is SHA-256 of the
  TrainJob's UID (so every reconcile derives the same one) and whose public key is its X25519
  public key, both Z85-encoded.

The scripts are kubetrain's own, written for the same job as upstream's; the values baked into
them (hostlist, bind/connect URIs, ``flux run`` flags, resource spec) follow upstream. kubetrain
only renders them: no Flux binary runs here.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = [
    "FLUX_BROKER_DEFAULTS",
    "flux_broker_settings",
    "flux_curve_cert",
    "flux_entrypoint_script",
    "flux_hostlist",
    "flux_init_script",
    "flux_range",
    "z85_encode",
]

# Broker settings a runtime's node container env or the TrainJob's env may override.
FLUX_BROKER_DEFAULTS: Mapping[str, str] = {
    "FLUX_VIEW_IMAGE": "ghcr.io/converged-computing/flux-view-ubuntu:tag-jammy",
    "FLUX_NETWORK_DEVICE": "eth0",
    "FLUX_QUEUE_POLICY": "fcfs",
}

_Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"


def z85_encode(data: bytes) -> str:
    """ZeroMQ's Z85 (RFC 32/Z85): 4 bytes, big-endian, become 5 characters."""
    if len(data) % 4:
        raise ValueError("Z85 encodes whole 4-byte groups only")
    out = []
    for i in range(0, len(data), 4):
        value = int.from_bytes(data[i : i + 4], "big")
        chunk = []
        for _ in range(5):
            value, digit = divmod(value, 85)
            chunk.append(_Z85[digit])
        out.append("".join(reversed(chunk)))
    return "".join(out)


def flux_curve_cert(trainjob_name: str, uid: str) -> str:
    """The ``curve.cert`` text (ZPL, as ``flux keygen`` writes it) for a TrainJob.

    The 32-byte secret is SHA-256 of the UID taken as an X25519 private key as is (unclamped,
    as Go's ``crypto/ecdh`` keeps it); the public key is derived from it.
    """
    # Imported here: cryptography costs ~0.1 s to import and only Flux TrainJobs need it.
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

    seed = hashlib.sha256(uid.encode()).digest()
    public = (
        X25519PrivateKey.from_private_bytes(seed)
        .public_key()
        .public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    )
    return (
        "#   ZeroMQ CURVE **Secret** Certificate\n"
        "#   Rendered by kubetrain for one TrainJob; keep it private.\n"
        "\n"
        "metadata\n"
        f'    name = "{trainjob_name}"\n'
        "curve\n"
        f'    public-key = "{z85_encode(public)}"\n'
        f'    secret-key = "{z85_encode(seed)}"\n'
    )


def flux_range(size: int, start: int = 0) -> str:
    """Flux idset notation: ``0`` for one item, ``0-3`` for four."""
    return f"{start}" if size == 1 else f"{start}-{start + size - 1}"


def flux_hostlist(trainjob_name: str, nodes: int) -> str:
    """``TJ-node-0-[0-3]``: the pod hostnames JobSet gives the ``node`` job's first replica."""
    return f"{trainjob_name}-node-0-[{flux_range(nodes)}]"


def flux_broker_settings(
    runtime_env: Iterable[Mapping[str, Any]] | None,
    trainer_env: Iterable[Mapping[str, Any]] | None,
    defaults: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """Broker settings: ``defaults`` (:data:`FLUX_BROKER_DEFAULTS` unless given), then the
    runtime ``node`` container's literal env values, then ``spec.trainer.env`` (the TrainJob
    wins, and a TrainJob variable without a literal value counts as ``""``, as upstream reads
    it); variables that are not settings are ignored."""
    settings = dict(FLUX_BROKER_DEFAULTS if defaults is None else defaults)
    for var in runtime_env or ():
        name, value = var.get("name"), var.get("value")
        if name in settings and isinstance(value, str):
            settings[name] = value
    for var in trainer_env or ():
        name, value = var.get("name"), var.get("value")
        if name in settings:
            settings[name] = value if isinstance(value, str) else ""
    return settings


def _toml_str(value: str) -> str:
    """A TOML basic string; the settings come from user env, so quote them properly."""
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'


def _broker_toml(
    trainjob_name: str, namespace: str, nodes: int, settings: Mapping[str, str]
) -> str:
    fqdn = f"{trainjob_name}.{namespace}.svc.cluster.local"
    return "\n".join(
        [
            "[access]",
            "allow-guest-user = true",
            "allow-root-owner = true",
            "",
            "[bootstrap]",
            'curve_cert = "/mnt/flux/config/etc/curve/curve.cert"',
            "default_port = 8050",
            f"default_bind = {_toml_str('tcp://' + settings['FLUX_NETWORK_DEVICE'] + ':%p')}",
            f'default_connect = "tcp://%h.{fqdn}:%p"',
            f'hosts = [{{ host = "{flux_hostlist(trainjob_name, nodes)}" }}]',
            "",
            "[resource]",
            'path = "/mnt/flux/config/etc/flux/system/R"',
            "",
            "[sched-fluxion-qmanager]",
            f"queue-policy = {_toml_str(settings['FLUX_QUEUE_POLICY'])}",
            "",
        ]
    )


def flux_init_script(
    *, trainjob_name: str, namespace: str, nodes: int, settings: Mapping[str, str]
) -> str:
    """``init.sh``: run by the ``flux-installer`` init container from the flux-view image.

    It writes the hostlist and ``broker.toml`` under ``/mnt/flux/config`` and copies the Flux view
    and the spack tree it links into (``/opt/software``) onto the shared volume.
    """
    broker = _broker_toml(trainjob_name, namespace, nodes, settings)
    hosts = flux_hostlist(trainjob_name, nodes)
    return f"""#!/bin/bash
# Stage Flux for TrainJob {trainjob_name}: configuration first, then the software itself.
set -euo pipefail

shared=/mnt/flux
config="${{shared}}/config"

mkdir -p "${{config}}/etc/flux/system/cron.d" "${{config}}/etc/flux/config" \\
         "${{config}}/etc/curve" "${{config}}/var/lib/flux" "${{config}}/run/flux" \\
         "${{shared}}/view"

# Every broker reads the same host list and broker configuration.
printf '%s\\n' '{hosts}' > "${{config}}/etc/flux/system/hostlist"
cat > "${{config}}/etc/flux/config/broker.toml" <<'BROKER_TOML'
{broker}BROKER_TOML
echo "broker configuration for $(hostname):"
cat "${{config}}/etc/flux/config/broker.toml"

# /opt/view is a link into spack's view directory; copy what it points at, and the spack
# tree its files link to, so the application container can use both.
view_dir=$(find /opt/views/._view -mindepth 1 -maxdepth 1 -type d | head -n 1)
cp -R "${{view_dir}}/." "${{shared}}/view/"
cp -R /opt/software "${{shared}}/"

touch "${{shared}}/flux-operator-done.txt"
echo "flux view staged in ${{shared}}"
"""


def flux_entrypoint_script(
    *, trainjob_name: str, nodes: int, procs_per_node: int, gpus: int
) -> str:
    """``entrypoint.sh``: wraps the trainer command (passed as its arguments) in Flux.

    The lead pod (``<trainjob>-node-0-0``) runs ``flux start ... flux run -N <nodes>
    -n <nodes × procs> [-g <gpus>] <command>``; the others run follower brokers, retrying
    until one exits cleanly. The resource spec has ``procs_per_node`` cores (and ``gpus`` GPUs).
    """
    flags = f"-N {nodes} -n {procs_per_node * nodes}"
    resources = f"--cores={flux_range(procs_per_node)}"
    if gpus > 0:
        flags += f" -g {gpus}"
        resources += f" --gpu={flux_range(gpus)}"
    lead = f"{trainjob_name}-node-0-0"
    return f"""#!/bin/bash
# Run the TrainJob {trainjob_name} command under Flux; the command arrives as "$@".
set -uo pipefail

shared=/mnt/flux
view="${{shared}}/view"
config="${{shared}}/config"
cfg="${{config}}/etc/flux/config"
command="$*"

# Flux comes from the staged view; append it so the image's own tools keep priority.
export PATH="${{PATH}}:${{view}}/bin"
cp -R "${{shared}}/software/." /opt/software/

# Point Flux at its own Python modules.
flux_python=$(find "${{view}}/lib" -maxdepth 1 -type d -name 'python3*' | head -n 1)
if [ -n "${{flux_python}}" ]; then
  export PYTHONPATH="${{PYTHONPATH:-}}:${{flux_python}}/site-packages"
fi
export LD_LIBRARY_PATH="${{LD_LIBRARY_PATH:-}}:${{view}}/lib"
export FLUX_RC_EXTRA="${{view}}/etc/flux/rc1.d"

# Helpers users can source from their own command.
cat > "${{shared}}/flux-view.sh" <<VIEW_ENV
export PATH=${{PATH}}
export PYTHONPATH=${{PYTHONPATH:-}}
export LD_LIBRARY_PATH=${{LD_LIBRARY_PATH}}
export fluxsocket=local://${{config}}/run/flux/local
VIEW_ENV
printf '%s\\n' 'flux module remove sched-simple' 'flux module load sched-fluxion-resource' \\
  'flux module load sched-fluxion-qmanager' > "${{shared}}/load-fluxion.sh"

# The certificate must be private to the broker's user.
cert="${{config}}/etc/curve/curve.cert"
cp /curve/curve.cert "${{cert}}"
chmod 0600 "${{cert}}"
chown "$(id -u)" "${{cert}}"

# Describe the cluster's resources once per pod.
flux R encode --hosts="$(cat "${{config}}/etc/flux/system/hostlist")" {resources} \\
  > "${{config}}/etc/flux/system/R"

export STATE_DIR="${{config}}/var/lib/flux"
export FLUX_OUTPUT_DIR=/tmp/fluxout
mkdir -p "${{STATE_DIR}}" "${{FLUX_OUTPUT_DIR}}"
broker_options=(
  "-Scron.directory=${{config}}/etc/flux/system/cron.d"
  "-Stbon.fanout=256"
  "-Srundir=${{config}}/run/flux"
  "-Sstatedir=${{STATE_DIR}}"
  "-Slocal-uri=local://${{config}}/run/flux/local"
  "-Slog-stderr-level=0"
  "-Slog-stderr-mode=local"
)

if [ "$(hostname)" = "{lead}" ]; then
  if [ -z "${{command}}" ]; then
    echo "no command given: starting an interactive Flux broker"
    flux broker --config-path "${{cfg}}" "${{broker_options[@]}}"
    status=$?
  else
    echo "flux run {flags} ${{command}}"
    # The command is one string on purpose: it is what the user wrote, re-split by the shell.
    # shellcheck disable=SC2086
    flux start -o --config "${{cfg}}" "${{broker_options[@]}}" flux run {flags} ${{command}}
    status=$?
  fi
else
  # Followers keep a broker up until the lead broker ends the instance cleanly.
  while true; do
    flux start -o --config "${{cfg}}" "${{broker_options[@]}}"
    status=$?
    if [ "${{status}}" -eq 0 ]; then
      echo "follower broker finished"
      break
    fi
    echo "follower broker exited with ${{status}}; retrying in 15s"
    sleep 15
  done
fi

touch "${{shared}}/flux-operator-complete.txt"
exit "${{status}}"
"""
