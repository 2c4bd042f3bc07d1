"""The executor's cache and the two orders its news can arrive in.

Watch events and the answers to the executor's own writes come over different connections, so
the event of a later change (or of the deletion) may be read before the answer to an earlier
write. Putting that answer in the cache would hide the later change for good: a suspend read
that way left a JobSet's pods running.
"""

from __future__ import annotations

from typing import Any

import pytest

from kubetrain.local.executor.cache import Key, keep_answer, keep_newest


def obj(rv: int, uid: str = "u1", suspend: bool = False) -> dict[str, Any]:
    return {
        "metadata": {"name": "js", "namespace": "default", "uid": uid, "resourceVersion": str(rv)},
        "spec": {"suspend": suspend},
    }


KEY: Key = ("default", "js")
LATER_SUSPEND = obj(12, suspend=True)


@pytest.mark.parametrize(
    ("cached", "arriving", "expected"),
    [
        pytest.param(None, obj(11), obj(11), id="a first event is stored"),
        pytest.param(obj(11), obj(12), obj(12), id="a later event replaces the cached state"),
        pytest.param(obj(11), obj(11), obj(11), id="the same version again is harmless"),
        pytest.param(
            LATER_SUSPEND, obj(11), LATER_SUSPEND,
            id="an event older than the cached answer of our own write is ignored",
        ),
        pytest.param(
            obj(15, uid="old"), obj(11, uid="new"), obj(11, uid="new"),
            id="a namesake replaces the object of the same name whatever the versions",
        ),
    ],
)  # fmt: skip
def test_a_watch_event_keeps_the_newest_state(
    cached: dict[str, Any] | None, arriving: dict[str, Any], expected: dict[str, Any]
) -> None:
    table = {} if cached is None else {KEY: cached}
    keep_newest(table, arriving)
    assert table[KEY] == expected


@pytest.mark.parametrize(
    ("cached", "answer", "expected"),
    [
        pytest.param(obj(11), obj(12), obj(12), id="the answer of a write replaces the older state"),
        pytest.param(
            LATER_SUSPEND, obj(11), LATER_SUSPEND,
            id="the event of a later change read before the answer wins (the suspend stays seen)",
        ),
        pytest.param(None, obj(12), None, id="the answer never brings back an object seen deleted"),
        pytest.param(
            obj(13, uid="namesake"), obj(12), obj(13, uid="namesake"),
            id="the answer never replaces a namesake created meanwhile",
        ),
    ],
)  # fmt: skip
def test_a_write_answer_only_replaces_an_older_state_of_the_same_object(
    cached: dict[str, Any] | None, answer: dict[str, Any], expected: dict[str, Any] | None
) -> None:
    table = {} if cached is None else {KEY: cached}
    keep_answer(table, answer)
    assert table.get(KEY) == expected
