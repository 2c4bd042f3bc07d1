"""The container command that runs a Python function as a CustomTrainer.

The function's source is written to a file next to the job's working directory and started by
the runtime's launcher: ``torchrun`` for torch runtimes, ``mpirun ... python`` for MPI, ``python``
otherwise, always as ``func(**func_args)``. Packages are installed only when the environment does
not already satisfy them: the check runs in the pod, so it is right on a cluster image and on the
local engine's environment alike, and a satisfied job never touches the network.
"""

from __future__ import annotations

import ast
import inspect
import re
import shlex
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["function_command", "launcher_for"]

MPI_HOME = "/home/mpiuser"

# Exits 0 when every requirement is installed at an allowed version. ``packaging`` is used when
# the image has it; without it only names are checked, which errs towards installing.
_CHECK = r"""
import sys
from importlib import metadata
try:
    from packaging.requirements import Requirement
except ImportError:
    Requirement = None
for text in sys.argv[1:]:
    if Requirement is not None:
        req = Requirement(text)
        name, spec = req.name, req.specifier
    else:
        name, spec = text.split("[")[0].split("=")[0].split("<")[0].split(">")[0].strip(), None
    try:
        have = metadata.version(name)
    except metadata.PackageNotFoundError:
        sys.exit(1)
    if spec is not None and have not in spec:
        sys.exit(1)
"""


def launcher_for(ml_policy: dict[str, Any]) -> tuple[list[str], str, str]:
    """(command prefix, interpreter, directory for the file) for a runtime's mlPolicy."""
    if ml_policy.get("mpi") is not None:
        return ["mpirun", "--hostfile", "/etc/mpi/hostfile", "bash", "-c"], "python", MPI_HOME
    if ml_policy.get("torch") is not None:
        return ["bash", "-c"], "torchrun", ""
    return ["bash", "-c"], "python", ""


def _file_name(func: Callable[..., Any]) -> str:
    try:
        source_file = inspect.getsourcefile(func) or ""
    except TypeError:
        source_file = ""
    name = Path(source_file).name
    # Notebook cells and <stdin> have no usable module file name.
    return name if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*\.py", name) else "train_func.py"


def _pip_block(packages: list[str], index_urls: list[str]) -> str:
    pkgs = " ".join(shlex.quote(p) for p in packages)
    index = [f"--index-url {shlex.quote(index_urls[0])}"] if index_urls else []
    index += [f"--extra-index-url {shlex.quote(u)}" for u in index_urls[1:]]
    opts = " ".join(index)
    return (
        f"if python - {pkgs} <<'KUBETRAIN_CHECK'\n{_CHECK.strip()}\nKUBETRAIN_CHECK\n"
        f"then echo 'Python packages already satisfied: {' '.join(packages)}'\n"
        "else\n"
        f"  PIP_DISABLE_PIP_VERSION_CHECK=1 python -m pip install --quiet --no-warn-script-location "
        f"{opts} {pkgs} >pip_install.log 2>&1 || "
        "{ echo 'pip install failed:' >&2; cat pip_install.log >&2; exit 1; }\n"
        "fi\n"
    )


def function_command(
    func: Callable[..., Any],
    func_args: dict[str, Any] | None,
    ml_policy: dict[str, Any],
    *,
    packages: list[str] | None = None,
    index_urls: list[str] | None = None,
) -> list[str]:
    """The ``spec.trainer.command`` that runs ``func(**func_args)`` under the runtime's launcher."""
    _check_func(func)
    _check_args(func_args or {})
    try:
        source = textwrap.dedent(inspect.getsource(func))
    except (OSError, TypeError) as exc:
        raise ValueError(f"cannot read the source of {func!r}: {exc}") from None
    call = f"{func.__name__}(**{func_args!r})" if func_args else f"{func.__name__}()"
    prefix, interpreter, folder = launcher_for(ml_policy)
    path = f"{folder}/{_file_name(func)}" if folder else _file_name(func)
    script = "".join(
        [
            _pip_block(packages, index_urls or []) if packages else "",
            f"cat > {shlex.quote(path)} <<'KUBETRAIN_FUNC'\n{source}\n{call}\nKUBETRAIN_FUNC\n",
            f"{interpreter} {shlex.quote(path)}\n",
        ]
    )
    # Kubernetes expands $(NAME) in commands and turns $$ into $: doubling every $ makes the
    # pod receive the source and arguments exactly as written.
    return [*prefix, script.replace("$", "$$")]


def _check_func(func: Callable[..., Any]) -> None:
    """Refuse what cannot travel as source text, before anything is created."""
    if not inspect.isfunction(func):
        raise ValueError(f"CustomTrainer.func must be a function defined with def, got {func!r}")
    if func.__name__ == "<lambda>":
        raise ValueError(
            "CustomTrainer.func is a lambda: its source cannot be shipped on its own; "
            "define the function with def"
        )
    if func.__code__.co_freevars:
        names = ", ".join(func.__code__.co_freevars)
        raise ValueError(
            f"CustomTrainer.func {func.__name__} uses variables of the function around it "
            f"({names}); the pod gets only its source: pass them in func_args"
        )


def _check_args(func_args: dict[str, Any]) -> None:
    """Each argument must come back equal from its repr, which is how it reaches the pod."""
    for key, value in func_args.items():
        if not isinstance(key, str) or not key.isidentifier():
            raise ValueError(f"func_args key {key!r} is not a keyword argument name")
        try:
            faithful = bool(ast.literal_eval(repr(value)) == value)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            faithful = False
        if not faithful:
            shown = repr(value)
            shown = shown if len(shown) <= 60 else shown[:57] + "..."
            raise ValueError(
                f"func_args[{key!r}] = {shown} ({type(value).__name__}) cannot be passed to the "
                "pod faithfully: only Python literals can (str, bytes, numbers, bool, None, and "
                "lists, tuples, sets and dicts of them)"
            )
