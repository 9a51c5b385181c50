#!/usr/bin/env bash
# Fuzz the decoders of server bytes for a while (fuzz/targets.py; property: any input decodes
# or raises kserve_v2's own error, within a time and memory bound).
#
#   bash scripts/fuzz.sh                      # every target, 60 s each
#   bash scripts/fuzz.sh h2_connection 600    # one target for 10 minutes
#   bash scripts/fuzz.sh all 300 -- -jobs=2   # after --: flags for libFuzzer (atheris only)
#   bash scripts/fuzz.sh --list               # the targets
#   bash scripts/fuzz.sh TARGET 0 FILE...     # replay inputs (a crash file)
#
# Findings land in .work/fuzz/crashes/ (the run says how to replay them), the growing corpus in
# .work/fuzz/corpus/TARGET (seeded from fuzz/corpus.py).
#
# Environment: .venv-fuzz, with atheris (coverage-guided, libFuzzer) when a wheel installs for
# this Python (atheris 3.0.0 has one for CPython 3.11 on Linux x86-64); made
# once, reused after. Without atheris the plain mutation driver runs instead (random
# mutations of the corpus, kept when they reach a new outcome). DRIVER=plain forces it;
# PYTHON picks the interpreter (default python3.11, else python3).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

VENV=".venv-fuzz"
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1 PIP_PROGRESS_BAR=off
log() { printf 'fuzz: %s\n' "$*" >&2; }

if [[ ! -x "$VENV/bin/python" ]]; then
    PY="${PYTHON:-}"
    if [[ -z "$PY" ]]; then
        PY="$(command -v python3.11 || command -v python3)"
    fi
    log "creating $VENV with $("$PY" -V 2>&1)"
    "$PY" -m venv "$VENV"
    # numpy and protobuf: what the decoders need (kserve_v2 itself comes from this checkout).
    "$VENV/bin/pip" install --quiet "numpy>=1.22" "protobuf>=4.25.1,<8"
    # A prebuilt wheel only: building atheris needs clang and libFuzzer.
    "$VENV/bin/pip" install --quiet --only-binary=:all: atheris \
        || log "no atheris wheel for this Python: the plain mutation driver will run"
fi

target="${1:-all}"
if [[ "$target" == --list ]]; then
    exec "$VENV/bin/python" -m fuzz.run --list
fi
seconds="${2:-60}"
shift $(($# < 2 ? $# : 2))
inputs=()
while [[ $# -gt 0 && "$1" != -- ]]; do
    inputs+=("$1")
    shift
done
exec "$VENV/bin/python" -m fuzz.run "$target" "${inputs[@]}" --seconds "$seconds" \
    --driver "${DRIVER:-auto}" "$@"
