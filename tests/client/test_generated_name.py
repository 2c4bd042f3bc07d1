"""The SDK names the objects it creates as the official SDK does: a letter, then 11 hex digits
(a valid DNS-1035 label, so it also names the JobSet's Services). TrainJobs and Experiments
get their names from the same function."""

from __future__ import annotations

import re

from kubetrain.client.trainer_client import generated_name

_SHAPE = re.compile(r"[a-z][0-9a-f]{11}")


def test_generated_names_have_the_official_sdks_shape_and_differ() -> None:
    names = [generated_name() for _ in range(200)]
    assert all(_SHAPE.fullmatch(n) for n in names), names
    assert len(set(names)) == len(names)
