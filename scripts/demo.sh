#!/usr/bin/env bash
# The demo: set up both environments (scripts/setup.sh, fast when nothing changed), start a local
# Triton with the sample models, run inference over HTTP (and gRPC), print inputs, outputs and
# timings, and stop the server.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
bash scripts/setup.sh
exec .venv/bin/python examples/demo.py "$@"
