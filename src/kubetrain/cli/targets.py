"""Which objects ``delete``, ``suspend`` and ``resume`` act on, read as kubectl reads them.

``NAME...`` (TrainJobs, kubetrain's shorthand), ``KIND NAME...``, ``KIND/NAME...``, ``KIND --all``
(or ``--all`` alone: every TrainJob of the namespace), and ``-f FILE`` (the objects in the
files). A kind without a name or ``--all`` is kubectl's error, and so is a kind the command
cannot act on.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kubetrain.client.jobs import JobClient
    from kubetrain.client.resources import KindInfo

__all__ = ["TargetError", "Targets", "add_target_arguments", "parse_targets"]


class TargetError(ValueError):
    """The words do not name objects the command can act on; the message says why."""


@dataclass
class Targets:
    named: list[tuple[KindInfo, str]] = field(default_factory=list)
    every: KindInfo | None = None  # --all: every object of this kind in the namespace
    objects: list[dict[str, Any]] = field(default_factory=list)  # from -f, file order

    def documents(self, jc: JobClient) -> list[dict[str, Any]]:
        """What to act on, as documents (apiVersion, kind, metadata.name[, namespace])."""
        if self.objects:
            return self.objects
        pairs = list(self.named)
        if self.every is not None:
            pairs += [(self.every, str(o["metadata"]["name"])) for o in jc.objects(self.every)]
        return [
            {"apiVersion": info.api_version, "kind": info.kind, "metadata": {"name": name}}
            for info, name in pairs
        ]


def add_target_arguments(parser: argparse.ArgumentParser, verb: str) -> None:
    parser.add_argument(
        "words", nargs="*", metavar="[KIND] NAME",
        help=f"TrainJob names, or a kind and names (trainjob NAME, trainjob/NAME), to {verb}",
    )  # fmt: skip
    parser.add_argument(
        "--all", action="store_true", help=f"{verb} every TrainJob (or KIND) of the namespace"
    )
    parser.add_argument(
        "-f", "--filename", action="append", metavar="PATH", help=f"{verb} the objects in these files"
    )  # fmt: skip


def parse_targets(args: argparse.Namespace, allowed: tuple[KindInfo, ...] | None = None) -> Targets:
    """The targets the arguments name; ``allowed``: the kinds the command acts on (None: any).

    Raises `TargetError`.
    """
    from kubetrain.client import resources as R
    from kubetrain.client.files import read_objects

    words: list[str] = list(args.words or [])
    if args.filename:
        if words or args.all:
            raise TargetError("give names, --all or -f FILE, not more than one of them")
        objs = read_objects(args.filename)
        for obj in objs:
            info = R.known_kind(str(obj.get("apiVersion", "")), str(obj.get("kind", "")))
            if info is not None:
                _check(info, allowed)
            elif allowed is not None:  # a kind only the server's discovery could place
                names = ", ".join(k.plural for k in allowed)
                raise TargetError(f"this command acts on {names}, not {obj.get('kind')}")
        return Targets(objects=objs)
    kind: KindInfo | None = None
    if words and "/" not in words[0]:
        kinds = R.resolve_kind(words[0])
        if len(kinds) > 1:
            raise TargetError(
                f'"{words[0]}" is ambiguous: name the kind ({", ".join(k.plural for k in kinds)})'
            )
        if kinds:
            kind = _check(kinds[0], allowed)
            words = words[1:]
    named: list[tuple[KindInfo, str]] = []
    for word in words:
        typed, slash, name = word.partition("/")
        if not slash:
            named.append((kind or R.TRAINJOB, word))
            continue
        if kind is not None:
            raise TargetError(
                f'there is no need to specify a resource type as a separate argument when passing arguments in resource/name form (got "{word}")'
            )
        kinds = R.resolve_kind(typed)
        if len(kinds) != 1 or not name:
            raise TargetError(f'"{word}": expected KIND/NAME with a known kind (trainjob/NAME)')
        named.append((_check(kinds[0], allowed), name))
    if args.all:
        if named:
            raise TargetError("give names or --all, not both")
        return Targets(every=kind or R.TRAINJOB)
    if not named:
        if kind is not None:
            raise TargetError("resource(s) were provided, but no name was specified")
        raise TargetError("name a TrainJob, or pass --all or -f FILE")
    return Targets(named=named)


def _check(info: KindInfo, allowed: tuple[KindInfo, ...] | None) -> KindInfo:
    if allowed is not None and info not in allowed:
        names = ", ".join(k.plural for k in allowed)
        raise TargetError(f"this command acts on {names}, not {info.plural}")
    return info
