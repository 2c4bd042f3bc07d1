"""Iceberg tables in an S3 server, for the data cache's tests, example and benchmark.

`write_table` writes a `pyarrow.Table` as an Iceberg table below ``s3://BUCKET/warehouse``
through pyiceberg (a throw-away SQLite catalog: the cache reads the metadata file, no
catalog) and returns the metadata file's location, ``METADATA_LOC`` for the cache.
``python -m kubetrain.testing.iceberg --endpoint URL --rows N`` does it from a shell.
"""

from __future__ import annotations

import argparse
import contextlib
import tempfile
from collections.abc import Mapping
from typing import Any

__all__ = ["s3_properties", "sample_table", "write_table"]


def s3_properties(endpoint: str, access_key_id: str, secret_access_key: str) -> dict[str, str]:
    return {
        "s3.endpoint": endpoint,
        "s3.access-key-id": access_key_id,
        "s3.secret-access-key": secret_access_key,
        "s3.region": "us-east-1",
    }


def sample_table(rows: int, *, text_bytes: int = 16, seed: int = 0) -> Any:
    """``rows`` rows of ``id`` (0..rows-1), ``label`` (id % 5), ``value`` and ``text``."""
    import numpy as np
    import pyarrow as pa

    rng = np.random.default_rng(seed)
    ids = np.arange(rows, dtype=np.int64)
    letters = rng.integers(97, 123, size=rows * text_bytes, dtype=np.uint8).tobytes()
    offsets = np.arange(0, (rows + 1) * text_bytes, text_bytes, dtype=np.int32)
    text = pa.StringArray.from_buffers(rows, pa.py_buffer(offsets.tobytes()), pa.py_buffer(letters))
    return pa.table(
        {
            "id": ids,
            "label": (ids % 5).astype(np.int32),
            "value": rng.standard_normal(rows),
            "text": text,
        }
    )


def write_table(
    table: Any,
    *,
    bucket: str,
    namespace: str,
    name: str,
    properties: Mapping[str, str],
    files: int = 1,
    warehouse: str | None = None,
) -> str:
    """Write ``table`` as ``namespace.name`` in ``files`` data files (one append each, in row
    order) below ``warehouse`` (default ``s3://BUCKET/warehouse``); the metadata file's
    ``s3://`` location."""
    import boto3
    from pyiceberg.catalog.sql import SqlCatalog

    s3 = boto3.session.Session().client(
        "s3",
        endpoint_url=properties["s3.endpoint"],
        aws_access_key_id=properties["s3.access-key-id"],
        aws_secret_access_key=properties["s3.secret-access-key"],
        region_name=properties.get("s3.region", "us-east-1"),
    )
    with contextlib.suppress(s3.exceptions.BucketAlreadyOwnedByYou):
        s3.create_bucket(Bucket=bucket)
    with tempfile.TemporaryDirectory() as tmp:
        catalog = SqlCatalog(
            "kubetrain",
            uri=f"sqlite:///{tmp}/catalog.db",
            warehouse=warehouse or f"s3://{bucket}/warehouse",
            **properties,
        )
        catalog.create_namespace_if_not_exists(namespace)
        ident = f"{namespace}.{name}"
        with contextlib.suppress(Exception):
            catalog.drop_table(ident)
        iceberg = catalog.create_table(ident, schema=table.schema)
        per_file = -(-table.num_rows // max(1, files))
        for start in range(0, max(table.num_rows, 1), max(per_file, 1)):
            iceberg.append(table.slice(start, per_file))
        return str(iceberg.metadata_location)


def _main() -> None:
    parser = argparse.ArgumentParser(prog="python -m kubetrain.testing.iceberg")
    parser.add_argument("--endpoint", required=True, help="the S3 server, http://HOST:PORT")
    parser.add_argument("--access-key-id", default="kubetrain")
    parser.add_argument("--secret-access-key", default="kubetrain-secret")
    parser.add_argument("--bucket", default="datasets")
    parser.add_argument("--table", default="cache.sample", help="NAMESPACE.NAME")
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--files", type=int, default=4)
    args = parser.parse_args()
    namespace, _, name = args.table.partition(".")
    if not name:
        parser.error(f"--table {args.table!r}: give NAMESPACE.NAME")
    props = s3_properties(args.endpoint, args.access_key_id, args.secret_access_key)
    loc = write_table(
        sample_table(args.rows), bucket=args.bucket, namespace=namespace, name=name,
        properties=props, files=args.files,
    )  # fmt: skip
    print(loc)


if __name__ == "__main__":
    _main()
