"""Pure presentation: ages, tables, server errors as one line, files read for -f."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from kubetrain.api.errors import LoadError
from kubetrain.cli.present import render_table
from kubetrain.client.errors import describe_status
from kubetrain.client.files import read_objects
from kubetrain.client.logs import step_name
from kubetrain.client.view import age

NOW = datetime(2026, 1, 2, 12, 0, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("delta", "shown"),
    [
        pytest.param(timedelta(seconds=42), "42s", id="under two minutes shows seconds"),
        pytest.param(
            timedelta(minutes=5, seconds=10), "5m10s", id="under ten minutes shows m and s"
        ),
        pytest.param(timedelta(minutes=45), "45m", id="under three hours shows minutes"),
        pytest.param(timedelta(hours=5, minutes=3), "5h3m", id="under eight hours shows h and m"),
        pytest.param(timedelta(days=3, hours=4), "3d4h", id="days with hours in the first week"),
    ],
)
def test_age_reads_like_kubectl(delta: timedelta, shown: str) -> None:
    assert age((NOW - delta).isoformat().replace("+00:00", "Z"), NOW) == shown


def test_age_without_a_time_is_unknown() -> None:
    assert age(None, NOW) == "<unknown>"


def test_table_columns_are_aligned_with_three_spaces() -> None:
    text = render_table(["NAME", "STATE"], [["a", "Running"], ["longer", "Complete"]])
    assert text.splitlines() == ["NAME     STATE", "a        Running", "longer   Complete"]


@pytest.mark.parametrize(
    ("status", "line"),
    [
        pytest.param(
            {
                "code": 404,
                "reason": "NotFound",
                "message": 'trainjobs.trainer.kubeflow.org "x" not found',
            },
            'trainjobs.trainer.kubeflow.org "x" not found',
            id="a 404 keeps the server's message naming the object",
        ),
        pytest.param(
            {
                "code": 422,
                "message": 'TrainJob.trainer.kubeflow.org "x" is invalid',
                "details": {
                    "causes": [{"field": "spec.trainer.numNodes", "message": "must be >= 1"}]
                },
            },
            'TrainJob.trainer.kubeflow.org "x" is invalid: spec.trainer.numNodes: must be >= 1',
            id="a 422 adds each cause with its field path",
        ),
        pytest.param(
            {"code": 502},
            'trainjobs "x": HTTP 502',
            id="a bare error names the object it was about",
        ),
    ],
)
def test_server_status_becomes_one_line(status: dict[str, object], line: str) -> None:
    assert describe_status(status, 'trainjobs "x"') == line


def test_files_folders_and_lists_are_read_in_order(tmp_path: Path) -> None:
    (tmp_path / "b.yaml").write_text(
        "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: ConfigMap, metadata: {name: c}}\n"
    )
    (tmp_path / "a.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\n---\n"
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\n"
    )
    (tmp_path / "notes.txt").write_text("ignored")
    assert [o["metadata"]["name"] for o in read_objects([str(tmp_path)])] == ["a", "b", "c"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param("a: [1\n", "line 2", id="broken YAML names the file and line"),
        pytest.param("- 1\n- 2\n", "must be a mapping", id="a list document is refused"),
        pytest.param(
            "kind: TrainJob\nmetadata: {name: x}\n",
            "apiVersion: Required value",
            id="apiVersion is required",
        ),
        pytest.param("", "holds no objects", id="an empty file is refused"),
    ],
)
def test_bad_files_give_clear_errors(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(text)
    with pytest.raises(LoadError) as err:
        read_objects([str(path)])
    assert str(path) in str(err.value)
    assert message in str(err.value)


@pytest.mark.parametrize(
    ("step", "rank", "name"),
    [
        pytest.param("node", None, "node-0", id="the default is rank 0"),
        pytest.param("node", 3, "node-3", id="a rank picks node-N"),
        pytest.param("launcher", None, "node-0", id="the MPI launcher is node-0"),
        pytest.param(
            "dataset-initializer", None, "dataset-initializer", id="initializers keep their names"
        ),
    ],
)
def test_step_options_name_a_step(step: str, rank: int | None, name: str) -> None:
    assert step_name(step, rank) == name
