"""Upstream's environment contract, read into one value. Pure: no I/O but the mapping given.

Upstream reads each dataclass field from the env variable of the upper-cased name; an empty
value counts as unset; ``IGNORE_PATTERNS`` is comma-separated, and the model initializers'
default applies only when the variable is absent. The scheme of ``STORAGE_URI`` picks the
provider: ``hf://`` and ``s3://`` for both kinds, ``cache://SCHEMA/TABLE`` for datasets (the
Distributed Data Cache: location = schema, prefix = table); anything else is an error, as
upstream exits on it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlparse

__all__ = [
    "DEFAULT_OUTPUT",
    "HF_MODEL_ALLOW_PATTERNS",
    "MODEL_IGNORE_PATTERNS",
    "Config",
    "InitializerError",
    "Kind",
    "read_config",
]

Kind = Literal["dataset", "model"]

# pkg/constants DatasetMountPath / ModelMountPath upstream.
DEFAULT_OUTPUT: Mapping[Kind, str] = {"dataset": "/workspace/dataset", "model": "/workspace/model"}
# The model initializers' default IGNORE_PATTERNS (the SDK sends the same list).
MODEL_IGNORE_PATTERNS = ("*.msgpack", "*.h5", "*.bin", "*.pt", "*.pth")
# Upstream's Hugging Face model initializer downloads only these.
HF_MODEL_ALLOW_PATTERNS = ("*.json", "*.safetensors", "*.model", "*.txt")

_SCHEMES = ("hf", "s3")
_SCHEMES_OF: Mapping[Kind, tuple[str, ...]] = {"dataset": ("hf", "s3", "cache"), "model": _SCHEMES}


class InitializerError(Exception):
    """A failure to report in one line: the URI and the cause."""

    def __init__(self, uri: str, cause: str) -> None:
        super().__init__(f"{uri}: {cause}" if uri else cause)
        self.uri = uri
        self.cause = cause


@dataclass(frozen=True)
class Config:
    """What one initializer run fetches, from where, with which credentials."""

    kind: Kind
    storage_uri: str
    scheme: str
    # hf: the repo id; s3: the bucket.
    location: str
    # s3: the key prefix ("" for the whole bucket); hf: unused.
    prefix: str
    access_token: str | None = None
    ignore_patterns: tuple[str, ...] = ()
    endpoint: str | None = None
    access_key_id: str | None = None
    secret_access_key: str | None = None
    region: str | None = None
    role_arn: str | None = None

    @property
    def allow_patterns(self) -> tuple[str, ...]:
        return HF_MODEL_ALLOW_PATTERNS if (self.kind, self.scheme) == ("model", "hf") else ()


def _get(env: Mapping[str, str], name: str) -> str | None:
    return env.get(name) or None


def _patterns(env: Mapping[str, str], kind: Kind) -> tuple[str, ...]:
    raw = env.get("IGNORE_PATTERNS")
    if raw is None:
        return MODEL_IGNORE_PATTERNS if kind == "model" else ()
    return tuple(p.strip() for p in raw.split(",") if p.strip())


def read_config(kind: Kind, env: Mapping[str, str]) -> Config:
    """The run ``env`` asks for; `InitializerError` naming the URI when it asks for nothing
    this initializer can fetch."""
    uri = _get(env, "STORAGE_URI")
    if uri is None:
        raise InitializerError("", "STORAGE_URI is not set (the TrainJob's storageUri)")
    parsed = urlparse(uri)
    if parsed.scheme not in _SCHEMES_OF[kind]:
        known = ", ".join(f"{s}://" for s in _SCHEMES_OF[kind])
        scheme = f"{parsed.scheme}://" if parsed.scheme else "no scheme"
        raise InitializerError(
            uri,
            f"unsupported storage URI scheme ({scheme}); the {kind} initializer fetches {known}",
        )
    if not parsed.netloc:
        what = {"s3": "bucket", "cache": "schema"}.get(parsed.scheme, "repository")
        raise InitializerError(uri, f"no {what}")
    path = parsed.path.strip("/")
    if parsed.scheme == "hf":
        if kind == "dataset":
            # Upstream: the repo is host + first path segment; deeper segments are not used.
            first = path.split("/", 1)[0]
            location = f"{parsed.netloc}/{first}" if first else parsed.netloc
        else:
            location = f"{parsed.netloc}/{path}" if path else parsed.netloc
        prefix = ""
    else:
        location, prefix = parsed.netloc, parsed.path.lstrip("/")
    return Config(
        kind=kind,
        storage_uri=uri,
        scheme=parsed.scheme,
        location=location,
        prefix=prefix,
        access_token=_get(env, "ACCESS_TOKEN"),
        ignore_patterns=_patterns(env, kind),
        endpoint=_get(env, "ENDPOINT"),
        access_key_id=_get(env, "ACCESS_KEY_ID"),
        secret_access_key=_get(env, "SECRET_ACCESS_KEY"),
        region=_get(env, "REGION"),
        role_arn=_get(env, "ROLE_ARN"),
    )
