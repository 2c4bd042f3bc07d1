#!/usr/bin/env bash
# The test command: install with dev tools, then lint, type-check, check layers, run the tests.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh --dev
export PATH="$PWD/.venv/bin:$PATH"
echo "== ruff";          ruff check src tests benchmarks examples
echo "== mypy --strict"; mypy
echo "== import-linter"; lint-imports
# Two workers: the end-to-end tests mostly wait on processes; tests that train with torch take
# turns on port 29500 through the executor's machine-wide port reservation. loadgroup: tests
# marked xdist_group share one worker (the install test's steps share one install, in order).
echo "== pytest";        pytest -q -n 2 --dist loadgroup "$@"
