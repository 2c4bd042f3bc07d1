"""``kubetrain install``: print the Kubernetes install manifest, or rewrite ``manifests/``.

The objects come from :mod:`kubetrain.controller.deploy`; this command only parses and prints.
"""

from __future__ import annotations

import argparse
from pathlib import Path

__all__ = ["add_arguments", "run"]


# --- the command ----------------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from kubetrain.controller.deploy import OVERLAYS

    parser.add_argument("--print", action="store_true", help="print the install manifest (YAML)")
    parser.add_argument(
        "--overlay",
        default="default",
        choices=sorted(OVERLAYS),
        help="which part: default (manager + runtimes), manager, runtimes, cert-manager",
    )
    parser.add_argument(
        "--write-manifests",
        type=Path,
        metavar="DIR",
        help="regenerate the kustomize tree (the repository's manifests/) in DIR",
    )


def run(args: argparse.Namespace) -> int:
    import sys

    from kubetrain.api.dump import dump_yaml
    from kubetrain.controller.deploy import install_objects, write_manifests

    if args.write_manifests is not None:
        for path in write_manifests(args.write_manifests):
            print(path)
        return 0
    if not args.print:
        print(
            "kubetrain install: pass --print and apply the output:\n"
            "  kubetrain install --print | kubectl apply --server-side -f -",
            file=sys.stderr,
        )
        return 2
    sys.stdout.write(dump_yaml(install_objects(args.overlay)))
    return 0


if __name__ == "__main__":  # pragma: no cover  (python -m kubetrain.cli.cmd_install ...)
    _parser = argparse.ArgumentParser(prog="kubetrain install")
    add_arguments(_parser)
    raise SystemExit(run(_parser.parse_args()))
