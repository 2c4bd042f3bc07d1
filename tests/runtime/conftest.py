"""Fixtures for the pure core: upstream's JobSet schema and a render whose JobSets are checked."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import yaml
from runtime_helpers import TEST_ENV, UPSTREAM, Obj

from kubetrain.runtime import render
from kubetrain.runtime.render import Plan
from upstream_data import jobset_crd


@pytest.fixture(scope="session")
def jobset_validator() -> Any:
    """A jsonschema validator for upstream's JobSet CRD (v1alpha2), parsed once per session."""
    import jsonschema

    with jobset_crd().open() as f:
        crd = yaml.load(f, Loader=yaml.CSafeLoader)
    version = next(v for v in crd["spec"]["versions"] if v["name"] == "v1alpha2")
    return jsonschema.Draft7Validator(version["schema"]["openAPIV3Schema"])


def check_jobsets(validator: Any, plan: Plan) -> None:
    """Every JobSet in the plan satisfies upstream's CRD schema."""
    for obj in plan.objects:
        if obj["kind"] == "JobSet":
            errors = sorted(validator.iter_errors(obj), key=lambda e: list(e.path))
            assert not errors, "\n".join(f"{list(e.path)}: {e.message}" for e in errors)


@pytest.fixture
def checked_render(jobset_validator: Any) -> Callable[..., Plan]:
    """``render`` with the test environment; every JobSet must satisfy upstream's CRD."""

    def run(job: Obj, runtime: Obj | None, **kwargs: Any) -> Plan:
        kwargs.setdefault("gates", UPSTREAM)
        kwargs.setdefault("environment", TEST_ENV)
        plan = render(job, runtime, **kwargs)
        check_jobsets(jobset_validator, plan)
        return plan

    return run
