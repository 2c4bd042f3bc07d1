"""Suite-wide fixtures.

Upstream's published files (CRDs, default runtimes, SDK request bodies) are test data kept outside
the repository; ``upstream_data`` says where they are found and skips a test that needs a missing
one, naming it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


UNGROUPED = pytest.StashKey[frozenset[str]]()


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under ``--dist loadgroup`` a test marked ``xdist_group`` must carry its group in its node
    id, or xdist spreads the group over workers and tests that share one set-up (the install
    test) run apart and out of order. Some pytest/xdist pairs drop the suffix without a word, so
    such tests fail at set-up, saying why."""
    if getattr(config.option, "loadgroup", False):
        config.stash[UNGROUPED] = frozenset(
            i.nodeid for i in items if i.get_closest_marker("xdist_group") and "@" not in i.nodeid
        )


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.nodeid in item.config.stash.get(UNGROUPED, frozenset()):
        pytest.fail(
            "pytest-xdist did not keep this test in its xdist_group under --dist loadgroup: "
            "this pytest and pytest-xdist do not work together; install the versions "
            "pyproject.toml allows",
            pytrace=False,
        )
