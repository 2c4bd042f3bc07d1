# The kubetrain controller image: `kubetrain controller`, no torch, non-root, read-only friendly.
# Build: docker build -t ghcr.io/kubetrain/controller:v0.1.0 .
# The base is pinned to an exact patch release; pin the digest too when publishing
# (docker buildx imagetools inspect python:3.12.8-slim-bookworm).

FROM python:3.12.8-slim-bookworm AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
# Only what the wheel needs (see .dockerignore): the project metadata and the package.
COPY pyproject.toml README.md ./
COPY src ./src
# No [torch] extra: the controller never imports torch.
RUN python -m venv /opt/kubetrain \
 && /opt/kubetrain/bin/pip install . \
 && /opt/kubetrain/bin/python -c "import kubetrain.controller.cluster, kubetrain.cli.cmd_controller"

FROM python:3.12.8-slim-bookworm
COPY --from=build /opt/kubetrain /opt/kubetrain
# Bytecode was compiled at install time; a read-only root filesystem must not be written to.
ENV PATH=/opt/kubetrain/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
# 65532: the conventional "nonroot" uid/gid; the Deployment also sets runAsNonRoot.
USER 65532:65532
WORKDIR /tmp
EXPOSE 9443 8443 10443 8081
ENTRYPOINT ["kubetrain", "controller"]
