#!/usr/bin/env bash
# Run the tests that need no server on the oldest and the newest Python the package supports
# (pyproject's requires-python), each in a throw-away environment under .work/venv-pyX.Y with
# the newest dependencies that Python gets (numpy included), so that .venv keeps its 3.11.
# Both Pythons run at once (the suite mostly waits on sockets and timers); each log is printed
# when it ends. An environment is rebuilt only when pyproject.toml or the interpreter changes.
#
# A Python this machine lacks is reported loudly: locally the others still run and the script
# passes (a developer's machine need not have every Python), but under CI=true it fails, so a
# CI image that loses one cannot turn the check green by skipping it.
#
# Extra arguments go to pytest instead of the default selection, e.g.
#   bash scripts/test_pythons.sh -x tests/test_messages.py
# and TEST_PYTHONS="3.12" picks other versions.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1 PIP_PROGRESS_BAR=off
read -r -a PYTHONS <<<"${TEST_PYTHONS:-3.10 3.13}"
EXTRAS="test,grpc,httpx,uvloop"
if [[ $# -gt 0 ]]; then
    PYTEST_ARGS=("$@")
else
    PYTEST_ARGS=(-q -m "not integration" tests)
fi

# The interpreter for version X.Y: pythonX.Y on PATH if it runs (a pyenv shim of a version
# that is not active only prints an error), else the newest X.Y.* that pyenv has installed.
find_python() {
    local version="$1" candidate root
    if candidate="$(command -v "python$version")" && "$candidate" -c "" 2>/dev/null; then
        echo "$candidate"
        return
    fi
    if command -v pyenv >/dev/null && root="$(pyenv root 2>/dev/null)"; then
        for candidate in $(printf '%s\n' "$root"/versions/"$version".*/bin/"python$version" |
            sort -rV); do
            if [[ -x "$candidate" ]] && "$candidate" -c "" 2>/dev/null; then
                echo "$candidate"
                return
            fi
        done
    fi
    return 1
}

# Set up the environment for one interpreter (quick when it is current), then run pytest.
run_one() {
    local python="$1" version="$2"
    local venv=".work/venv-py$version"
    local marker="$venv/.installed"
    local want
    want="$("$python" -VV | tr '\n' ' ') [$EXTRAS] $(sha256sum pyproject.toml | cut -d' ' -f1)"
    if [[ ! -f "$marker" || "$(cat "$marker")" != "$want" ]]; then
        echo "== setting up $venv"
        rm -rf "$venv"
        "$python" -m venv "$venv"
        "$venv/bin/python" -m pip install --quiet -e ".[$EXTRAS]"
        printf '%s' "$want" >"$marker"
    fi
    "$venv/bin/python" - <<'PY'
import sys, grpc, google.protobuf, httpx, numpy
print(f"python {sys.version.split()[0]}: numpy {numpy.__version__}, grpcio {grpc.__version__}, "
      f"protobuf {google.protobuf.__version__}, httpx {httpx.__version__}")
PY
    "$venv/bin/python" -m pytest -p no:cacheprovider "${PYTEST_ARGS[@]}"
}

mkdir -p .work
missing=()
pids=()
ran=()
for version in "${PYTHONS[@]}"; do
    if ! python="$(find_python "$version")"; then
        missing+=("$version")
        continue
    fi
    log=".work/test-py$version.log"
    # Not `run_one || ...`: errexit is off in a function called there, so a failed install
    # would go on to the tests; the trap reports the status instead.
    (
        start=$SECONDS
        trap 'echo "== python $version: exit $? after $((SECONDS - start))s"' EXIT
        run_one "$python" "$version"
    ) >"$log" 2>&1 &
    pids+=("$!")
    ran+=("$version")
done

failed=()
for i in "${!pids[@]}"; do
    status=0
    wait "${pids[$i]}" || status=$?
    echo "======== python ${ran[$i]} (.work/test-py${ran[$i]}.log)"
    cat ".work/test-py${ran[$i]}.log"
    if [[ $status -ne 0 ]]; then
        failed+=("${ran[$i]}")
    fi
done

for version in "${missing[@]}"; do
    {
        echo "########################################################################"
        echo "# WARNING: Python $version not found (no working python$version, nor in pyenv)."
        echo "# The package claims to support it; these tests did NOT run on it."
        echo "########################################################################"
    } >&2
done
if [[ ${#failed[@]} -gt 0 ]]; then
    echo "FAILED on Python ${failed[*]}" >&2
    exit 1
fi
if [[ ${#missing[@]} -gt 0 && "${CI:-}" == "true" ]]; then
    echo "FAILED: under CI every supported Python must run (missing: ${missing[*]})" >&2
    exit 1
fi
echo "passed on Python ${ran[*]:-(none)}"
