#!/usr/bin/env bash
# Installs kubetrain into ./.venv with everything the local engine needs.
#   scripts/install.sh          runtime install (torch CPU build and the initializers included)
#   scripts/install.sh --dev    also the test and lint tools and the other frameworks
#                               (JAX, XGBoost, mpi4py, DeepSpeed, MLX) the e2e tests train with
set -euo pipefail
cd "$(dirname "$0")/.."
extra="torch,initializers,datacache"
[[ "${1:-}" == "--dev" ]] && extra="dev"

# System packages: bubblewrap sandboxes pods; OpenMPI and ssh serve the MPI runtimes.
need=()
command -v bwrap >/dev/null || need+=(bubblewrap)
command -v mpirun >/dev/null || need+=(openmpi-bin libopenmpi-dev)
command -v ssh >/dev/null || need+=(openssh-client)
[[ -x /usr/sbin/sshd ]] || need+=(openssh-server)
# The pod network: namespaces and veths (iproute2), egress (slirp4netns), NAT (iptables).
command -v ip >/dev/null || need+=(iproute2)
command -v slirp4netns >/dev/null || need+=(slirp4netns)
command -v iptables >/dev/null || [[ -x /usr/sbin/iptables ]] || need+=(iptables)
# kubectl exec and port-forward enter a pod's namespaces (nsenter, setsid, setpriv).
command -v nsenter >/dev/null && command -v setpriv >/dev/null || need+=(util-linux)
# The dashboard's browser tests drive Debian's Chromium (Playwright never downloads a browser).
[[ "$extra" == "dev" && ! -x /usr/bin/chromium ]] && need+=(chromium)
# benchmarks/initializers.py's S3 server, s3rver, is an npm package (installed on first use).
[[ "$extra" == "dev" ]] && ! command -v npm >/dev/null && need+=(nodejs npm)
if ((${#need[@]})); then
  if [[ $(id -u) -eq 0 ]]; then SUDO=""; else SUDO="sudo"; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi

[[ -x .venv/bin/python ]] || python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e ".[${extra}]"
