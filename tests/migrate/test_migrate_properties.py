"""Whatever value sits at whatever place of a real manifest, the tools answer with a result or
a clear refusal (MigrateError / a finding), never with another exception."""

from __future__ import annotations

from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from migrate_helpers import UPSTREAM_V1, UPSTREAM_V2X, load
from test_upgrade_check import V20, V21

from kubetrain.migrate import MigrateError, convert, upgrade_check, upgrade_fix
from kubetrain.migrate.admit import admission_errors
from kubetrain.runtime.podspec import tree_copy

V1_DOCS = [d for p in sorted(UPSTREAM_V1.glob("*.yaml")) for d in load(p)]
V2_DOCS = [d for p in sorted(UPSTREAM_V2X.glob("*.yaml")) for d in load(p)] + [
    yaml.safe_load(V20),
    yaml.safe_load(V21),
]
ODD = st.sampled_from([None, "x", "2", 7, -1, 1.5, True, [], [1], {}, {"a": 1}])


def _paths(obj: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [path] if path else []
    if isinstance(obj, dict):
        out += [p for k, v in obj.items() for p in _paths(v, (*path, k))]
    elif isinstance(obj, list):
        out += [p for i, v in enumerate(obj) for p in _paths(v, (*path, i))]
    return out


@st.composite
def mutated(draw: st.DrawFn, docs: list[dict[str, Any]]) -> dict[str, Any]:
    doc: dict[str, Any] = tree_copy(draw(st.sampled_from(docs)))
    path = draw(st.sampled_from(_paths(doc)))
    node: Any = doc
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = draw(ODD)
    return doc


@settings(
    max_examples=150, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
@given(mutated(V1_DOCS))
def test_convert_answers_every_malformed_v1_job_with_a_conversion_or_a_refusal(
    doc: dict[str, Any],
) -> None:
    try:
        c = convert(doc)
    except MigrateError as exc:
        assert exc.errors and all(str(e) for e in exc.errors)
        return
    assert admission_errors(c.objects) == []


@settings(
    max_examples=150, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
@given(mutated(V2_DOCS))
def test_upgrade_check_answers_every_malformed_manifest_with_findings(doc: dict[str, Any]) -> None:
    upgrade_check([doc])
    admission_errors(upgrade_fix([doc]))
