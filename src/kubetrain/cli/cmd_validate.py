"""``kubetrain validate -f FILE``: the admission checks of ``render``; silent when valid."""

from __future__ import annotations

import argparse
import sys

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from kubetrain.cli.cmd_render import add_file_arguments

    add_file_arguments(parser)


def run(args: argparse.Namespace) -> int:
    from kubetrain.cli.cmd_render import admit, load_inputs, parse_gates, print_errors

    gates = parse_gates(args.feature_gates)
    if gates is None:
        return 1
    inputs = load_inputs(args.filename)
    if inputs is None:
        return 1
    _, errors, warnings = admit(inputs, gates)
    for w in warnings:
        print(f"Warning: {w}", file=sys.stderr)
    if errors:
        print_errors(errors)
        return 1
    return 0
