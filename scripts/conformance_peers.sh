#!/usr/bin/env bash
# Run the conformance suite against KServe's Python model server and MLServer (optional, not in
# CI; about a minute once the environments exist).
#
#   bash scripts/conformance_peers.sh                      # both servers, reports in conformance/reports
#   bash scripts/conformance_peers.sh --server mlserver    # one of them
#   bash scripts/conformance_peers.sh --out /tmp/r --only 'rest.infer.*'
#
# 1. scripts/setup.sh makes (or checks) .venv and the servers' own environments, .venv-kserve
#    (kserve 0.21.0) and .venv-mlserver (mlserver 1.7.1), from the pinned lists in tests/peers/
#    (SKIP_TRITON=1: Triton is not needed here).
# 2. conformance/peers/run.py starts each server on 127.0.0.1 with the suite's models for it
#    (conformance/peers/kserve/server.py, conformance/peers/mlserver/), runs
#    `kserve-v2 conformance` over HTTP and gRPC with the server's known deviations
#    (kserve_v2/conformance/expected/kserve-0.21.json, mlserver-1.7.json), and writes
#    <server>.json, .md and .html and the server's log to conformance/reports/ (only the .md
#    files are kept in git).
#
# SKIP_SETUP=1 uses the environments as they are (no scripts/setup.sh).
#
# Exit status: 0 when every case passed, skipped or failed as a listed deviation; 1 when a case
# failed that is not listed (a new deviation, or a change of the server), a case broke, a
# listed deviation passed, or a server could not be checked (its URL did not answer, or no case
# ran). Options other than --server and --out go to `kserve-v2 conformance`.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

if [[ "${SKIP_SETUP:-0}" != 1 ]]; then
    SKIP_TRITON=1 bash scripts/setup.sh
fi
# As a module from the checkout's root, so that this checkout's kserve_v2 is the one imported.
exec .venv/bin/python -m conformance.peers.run "$@"
