#!/usr/bin/env bash
# Set up (scripts/setup.sh, fast when nothing changed), then lint, type-check and test.
# Extra arguments go to pytest, e.g.  bash scripts/test.sh -m "not integration" -x
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

bash scripts/setup.sh

echo "== unasync --check (generated sync modules match their async sources)" >&2
.venv/bin/python scripts/unasync.py --check
echo "== ruff check" >&2
.venv/bin/ruff check .
echo "== mypy" >&2
.venv/bin/mypy
echo "== pytest" >&2
# exec: pytest's exit status is the script's.
exec .venv/bin/python -m pytest "$@"
