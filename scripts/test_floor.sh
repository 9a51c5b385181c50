#!/usr/bin/env bash
# Run the tests again on the oldest supported dependencies: numpy 1.x and the gRPC floors
# (grpcio 1.62.3, protobuf 4.25.1, as declared in pyproject's `grpc` extra), in a throw-away
# environment under .work/ so that .venv keeps the newest versions.
# Extra arguments go to pytest (default: every test that needs no server, then the gRPC client
# and streaming tests against a live Triton).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1 PIP_PROGRESS_BAR=off
FLOOR=.work/venv-floor
PINS=("numpy==1.26.4" "grpcio==1.62.3" "protobuf==4.25.1")
TOOLS=(pytest pytest-asyncio pytest-timeout hypothesis cryptography httpx)
marker="$FLOOR/.floor-pins"
if [[ ! -f "$marker" || "$(cat "$marker")" != "${PINS[*]} ${TOOLS[*]}" ]]; then
    rm -rf "$FLOOR"
    python3 -m venv "$FLOOR"
    "$FLOOR/bin/python" -m pip install --quiet "${PINS[@]}"
    # The package and its test tools, without letting pip upgrade the pinned floors.
    "$FLOOR/bin/python" -m pip install --quiet --no-deps -e .
    "$FLOOR/bin/python" -m pip install --quiet "${TOOLS[@]}"
    printf '%s' "${PINS[*]} ${TOOLS[*]}" >"$marker"
fi
"$FLOOR/bin/python" - <<'PY'
import grpc, google.protobuf, numpy
print(f"floor: numpy {numpy.__version__}, grpcio {grpc.__version__}, protobuf {google.protobuf.__version__}")
PY
if [[ $# -gt 0 ]]; then
    exec "$FLOOR/bin/python" -m pytest -p no:cacheprovider "$@"
fi
"$FLOOR/bin/python" -m pytest -p no:cacheprovider -q -m "not integration" tests
exec "$FLOOR/bin/python" -m pytest -p no:cacheprovider -q tests/grpc/test_client.py \
    tests/grpc/test_stream.py
