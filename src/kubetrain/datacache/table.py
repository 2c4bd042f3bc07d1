"""The Iceberg table behind a cache, read with pyiceberg from its metadata file.

Like upstream's cache (a static table from ``METADATA_LOC``; no catalog), with S3 settings
from the standard AWS variables: ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``,
``AWS_SESSION_TOKEN``, ``AWS_REGION`` / ``AWS_DEFAULT_REGION`` and ``AWS_ENDPOINT_URL_S3`` /
``AWS_ENDPOINT_URL`` (an S3-compatible server). Without keys pyarrow's S3 client finds them
as every AWS client does (IRSA's web identity token included).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["CacheSource", "TableError", "file_rows", "load_table", "read_files", "source_from_env"]


class TableError(RuntimeError):
    """The table cannot be read: one line naming the metadata file and the cause."""


@dataclass(frozen=True)
class CacheSource:
    """Upstream's cache env: ``METADATA_LOC``, ``SCHEMA_NAME``, ``TABLE_NAME``."""

    metadata_loc: str
    schema_name: str
    table_name: str
    properties: Mapping[str, str]

    @property
    def name(self) -> str:
        return f"{self.schema_name}.{self.table_name}"


_S3_PROPERTIES = (
    ("s3.access-key-id", ("AWS_ACCESS_KEY_ID",)),
    ("s3.secret-access-key", ("AWS_SECRET_ACCESS_KEY",)),
    ("s3.session-token", ("AWS_SESSION_TOKEN",)),
    ("s3.region", ("AWS_REGION", "AWS_DEFAULT_REGION")),
    ("s3.endpoint", ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL")),
)


def source_from_env(env: Mapping[str, str] | None = None) -> CacheSource:
    env = os.environ if env is None else env
    missing = [n for n in ("METADATA_LOC", "SCHEMA_NAME", "TABLE_NAME") if not env.get(n)]
    if missing:
        raise TableError(f"{', '.join(missing)} not set (the cache initializer sets them)")
    props: dict[str, str] = {}
    for prop, names in _S3_PROPERTIES:
        value = next((env[n] for n in names if env.get(n)), None)
        if value:
            props[prop] = value
    return CacheSource(env["METADATA_LOC"], env["SCHEMA_NAME"], env["TABLE_NAME"], props)


def load_table(source: CacheSource) -> Any:
    """The `pyiceberg` StaticTable of ``source``; `TableError` when it cannot be read."""
    from pyiceberg.table import StaticTable

    try:
        return StaticTable.from_metadata(source.metadata_loc, dict(source.properties))
    except Exception as err:  # pyiceberg and pyarrow raise many kinds; say which file
        raise TableError(
            f"table {source.name}: cannot read {source.metadata_loc}: {type(err).__name__}: {err}"
        ) from err


def file_rows(table: Any) -> list[tuple[str, int]]:
    """Each data file of the table's current snapshot with its record count, in scan order."""
    tasks = list(table.scan().plan_files())
    if any(task.delete_files for task in tasks):
        # Upstream's cache ignores delete files; serving deleted rows would be wrong data.
        raise TableError("the table has row-level deletes, which the cache does not apply")
    return [(task.file.file_path, int(task.file.record_count)) for task in tasks]


def read_files(table: Any, paths: Sequence[str]) -> Any:
    """One `pyarrow.Table` of ``paths``' rows, file after file in the order given."""
    import pyarrow as pa
    from pyiceberg.expressions import AlwaysTrue
    from pyiceberg.io.pyarrow import ArrowScan

    scan = table.scan()
    by_path = {task.file.file_path: task for task in scan.plan_files()}
    unknown = [p for p in paths if p not in by_path]
    if unknown:
        raise TableError(f"not a data file of the table's current snapshot: {unknown[0]}")
    arrow = ArrowScan(table.metadata, table.io, scan.projection(), AlwaysTrue())
    schema = scan.projection().as_arrow()
    parts = [arrow.to_table([by_path[p]]) for p in paths]
    if not parts:
        return schema.empty_table()
    # Chunks stay as read: slicing and streaming them later copies nothing.
    return pa.concat_tables(parts) if len(parts) > 1 else parts[0]
