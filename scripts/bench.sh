#!/usr/bin/env bash
# Side-by-side benchmarks: kserve-v2 vs tritonclient==2.73.0 against one local Triton server.
#
#   bash scripts/bench.sh                         # every scenario, default rounds
#   bash scripts/bench.sh --quick                 # a few requests per scenario (validation)
#   bash scripts/bench.sh --only http-small --rounds 5
#   bash scripts/bench.sh --list                  # the scenario names
#
# Arguments go to benchmarks/run.py (see `--help` there). The markdown table is printed and
# written to benchmarks/results.md (unless --list/--help, or --output elsewhere).
#
# Environments:
#   .venv-bench   the benchmark's own: kserve-v2 (editable, grpc+httpx+uvloop extras) next to
#                 tritonclient[http,grpc]==2.73.0 and psutil. Kept apart so that .venv (the
#                 client's tests) never sees tritonclient.
#   .venv-triton  the Triton server's, made by scripts/setup.sh when missing or unusable.
#
# Idempotent: .venv-bench records what it was installed from and is reused while that matches.
# Environment: PYTHON (interpreter for .venv-bench; default python3.11), FORCE=1 (reinstall
# .venv-bench).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

VENV=".venv-bench"
MARKER=".kserve-v2-bench"
TRITONCLIENT_SPEC="tritonclient[http,grpc]==2.73.0"
EXTRAS="grpc,httpx,uvloop"
RESULTS="benchmarks/results.md"

export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1 PIP_PROGRESS_BAR=off

log() { printf 'bench: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

PY="${PYTHON:-python3.11}"
command -v "$PY" >/dev/null || die "$PY not found (set PYTHON=... to a Python 3.11)"

# -- the Triton server's environment ------------------------------------------------------------
server_ok() {
    [[ -x .venv-triton/bin/python ]] && .venv-triton/bin/python -c '
import glob, sys, numpy
assert int(numpy.__version__.split(".")[0]) < 2
sys.exit(not glob.glob(sys.prefix + "/lib/python3.*/site-packages/pytriton/tritonserver/bin/tritonserver"))
' >/dev/null 2>&1
}
if ! server_ok; then
    [[ -f scripts/setup.sh ]] || die ".venv-triton is missing and scripts/setup.sh is not there"
    log ".venv-triton missing or unusable: running scripts/setup.sh"
    bash scripts/setup.sh
    server_ok || die ".venv-triton is still unusable after scripts/setup.sh"
fi

# -- the benchmark's environment ----------------------------------------------------------------
pyproject_hash="$("$PY" -c 'import hashlib, sys
print(hashlib.sha256(open(sys.argv[1], "rb").read()).hexdigest())' pyproject.toml)"
want="$(printf '%s\n' "pip install -e .[$EXTRAS] $TRITONCLIENT_SPEC psutil" \
    "pyproject.toml=$pyproject_hash" "python=$("$PY" -c 'import sys; print(sys.version.split()[0])')")"
bench_check=("$VENV/bin/python" -c 'import kserve_v2, tritonclient.http, tritonclient.grpc, psutil, uvloop')
if [[ "${FORCE:-0}" != 1 && -f "$VENV/$MARKER" && "$(cat "$VENV/$MARKER")" == "$want" ]] \
    && "${bench_check[@]}" >/dev/null 2>&1; then
    log "$VENV is up to date"
else
    log "creating $VENV with $("$PY" -V 2>&1)"
    rm -rf "$VENV"
    "$PY" -m venv "$VENV"
    # Keep the environment out of `git status` without touching the project's .gitignore.
    printf '*\n' >"$VENV/.gitignore"
    "$VENV/bin/python" -m pip install --quiet --upgrade pip
    "$VENV/bin/python" -m pip install --quiet -e ".[$EXTRAS]" "$TRITONCLIENT_SPEC" psutil
    "${bench_check[@]}" || die "$VENV is incomplete after installation"
    printf '%s\n' "$want" >"$VENV/$MARKER"
fi

# -- run ----------------------------------------------------------------------------------------
# Writes the table to $RESULTS itself (--output), so a failed run leaves the last good one.
exec "$VENV/bin/python" benchmarks/run.py --output "$RESULTS" "$@"
