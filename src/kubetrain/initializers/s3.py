"""``s3://bucket/prefix``: every object under the prefix, through boto3's transfer manager.

One listing, then every selected object queued on one ``s3transfer`` manager: objects go in
parallel, and an object above the multipart threshold in parallel byte ranges. Sizes come from
the listing, so no object costs an extra HEAD. The output path of an object is its key below
the prefix; an object whose key is the prefix itself keeps its base name (upstream's rule).
"""

from __future__ import annotations

import logging
import posixpath
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .config import Config, InitializerError
from .meter import Meter, human
from .select import selected
from .store import Store

__all__ = ["S3Object", "fetch_s3", "s3_client"]

log = logging.getLogger("kubetrain.initializers")

MB = 1024 * 1024


@dataclass(frozen=True)
class S3Object:
    key: str
    rel: str
    size: int
    etag: str


def s3_client(cfg: Config, *, concurrency: int) -> Any:
    import boto3
    from botocore.config import Config as BotoConfig

    return boto3.session.Session().client(
        "s3",
        endpoint_url=cfg.endpoint,
        aws_access_key_id=cfg.access_key_id,
        aws_secret_access_key=cfg.secret_access_key,
        region_name=cfg.region if cfg.region and cfg.region != "auto" else None,
        config=BotoConfig(
            # Path-style: an endpoint given as an address has no per-bucket host names.
            s3={"addressing_style": "path" if cfg.endpoint else "auto"},
            retries={"max_attempts": 3, "mode": "standard"},
            connect_timeout=5,
            read_timeout=60,
            max_pool_connections=concurrency + 4,
        ),
    )


def _cause(err: Exception, cfg: Config) -> str:
    """One line saying what went wrong, in the user's terms."""
    from botocore.exceptions import (
        ClientError,
        EndpointConnectionError,
        NoCredentialsError,
        ParamValidationError,
    )

    if isinstance(err, EndpointConnectionError):
        return f"cannot connect to the S3 endpoint {cfg.endpoint or '(AWS default)'}"
    if isinstance(err, NoCredentialsError):
        return "no S3 credentials (set ACCESS_KEY_ID and SECRET_ACCESS_KEY)"
    if isinstance(err, ParamValidationError):
        return f"invalid request: {err}"
    if isinstance(err, ClientError):
        error = err.response.get("Error", {})
        code = str(error.get("Code", ""))
        status = err.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        if code == "NoSuchBucket":
            return f"bucket {cfg.location!r} does not exist"
        if code == "InvalidAccessKeyId":
            return "the S3 server does not know this access key (ACCESS_KEY_ID)"
        if code == "SignatureDoesNotMatch":
            return "the secret access key does not match the access key (SECRET_ACCESS_KEY)"
        if code in ("AccessDenied", "403") or status == 403:
            return f"access denied to bucket {cfg.location!r} with these credentials"
        if code in ("NoSuchKey", "404") or status == 404:
            return "the object vanished while it was being fetched"
        return f"S3 error {code or status}: {error.get('Message', '')}".strip()
    return f"{type(err).__name__}: {err}"


def list_objects(client: Any, cfg: Config) -> list[S3Object]:
    objects: list[S3Object] = []
    pages = client.get_paginator("list_objects_v2").paginate(Bucket=cfg.location, Prefix=cfg.prefix)
    for page in pages:
        for item in page.get("Contents") or []:
            key = str(item["Key"])
            if key.endswith("/"):
                continue  # a folder marker
            rel = key[len(cfg.prefix) :].lstrip("/") or posixpath.basename(key)
            objects.append(S3Object(key, rel, int(item["Size"]), str(item.get("ETag", ""))))
    return objects


def _identity(cfg: Config, obj: S3Object) -> str:
    return f"s3|{cfg.endpoint or 'aws'}|{cfg.location}|{obj.key}|{obj.etag}|{obj.size}"


class _Progress:
    """An ``s3transfer`` subscriber: gives the known size (no HEAD) and counts bytes."""

    def __init__(self, size: int, meter: Meter) -> None:
        self.size = size
        self.meter = meter

    def on_queued(self, future: Any, **kwargs: Any) -> None:
        future.meta.provide_transfer_size(self.size)

    def on_progress(self, future: Any, bytes_transferred: int, **kwargs: Any) -> None:
        self.meter.add(bytes_transferred)

    def on_done(self, future: Any, **kwargs: Any) -> None:
        pass


def fetch_s3(cfg: Config, store: Store, *, concurrency: int = 16) -> None:
    from boto3.s3.transfer import TransferConfig, create_transfer_manager

    client = s3_client(cfg, concurrency=concurrency)
    try:
        listed = list_objects(client, cfg)
    except Exception as err:
        raise InitializerError(cfg.storage_uri, _cause(err, cfg)) from err
    if not listed:
        where = f"under prefix {cfg.prefix!r}" if cfg.prefix else "at all"
        raise InitializerError(
            cfg.storage_uri, f"no object in bucket {cfg.location!r} {where} (wrong key?)"
        )
    objects = [o for o in listed if selected(o.rel, ignore=cfg.ignore_patterns)]
    for o in listed:
        if o not in objects:
            log.info("skipping ignored file: %s", o.key)
    todo = [o for o in objects if not store.have(o.rel, _identity(cfg, o))]
    cached = len(objects) - len(todo)
    if store.cache is not None and cached:
        size = sum(o.size for o in objects if o not in todo)
        log.info(
            "cache hit: %d of %d objects (%s) already fetched", cached, len(objects), human(size)
        )
    if not todo:
        log.info("nothing to fetch: all %d objects are in place", len(objects))
        return
    total = sum(o.size for o in todo)
    log.info("fetching %d objects (%s) from %s", len(todo), human(total), cfg.storage_uri)
    config = TransferConfig(
        multipart_threshold=8 * MB,
        multipart_chunksize=8 * MB,
        max_concurrency=concurrency,
        max_io_queue=1000,
    )
    with Meter(total) as meter, create_transfer_manager(client, config) as manager:
        futures = []
        for o in todo:
            part = store.target(o.rel, _identity(cfg, o))
            future = manager.download(
                cfg.location, o.key, str(part), subscribers=[_Progress(o.size, meter)]
            )
            futures.append((o, part, future))
        for o, part, future in futures:
            try:
                future.result()
            except Exception as err:
                manager.shutdown(cancel=True)
                raise InitializerError(f"s3://{cfg.location}/{o.key}", _cause(err, cfg)) from err
            store.commit(o.rel, _identity(cfg, o), Path(part))
