#!/usr/bin/env bash
# Create (or bring up to date) the virtual environments of this checkout:
#
#   .venv           the client: kserve-v2 editable with its test/httpx/grpc/dev/uvloop extras, numpy 2
#   .venv-triton    the server: numpy<2, then nvidia-pytriton==0.7.0 (Triton 2.51) with --no-deps
#   .venv-kserve    KServe's Python model server (kserve 0.21.0), pinned by
#                   tests/peers/kserve-requirements.txt
#   .venv-mlserver  MLServer 1.7.1, pinned by tests/peers/mlserver-requirements.txt
#   .venv-locust    Locust (kserve-v2 editable with its locust and grpc extras), for
#                   tests/locust: importing locust monkey-patches the process with gevent
#                   (and locust brings a pytest plugin), so it never enters .venv; the
#                   tests run it as subprocesses
#
# The last two are the other servers the interoperability tests (tests/interop) run against;
# each gets its own environment because each pins its own grpcio/protobuf/fastapi, and the tests
# only start them as subprocesses (kserve_v2.testing.KServeServer / MLServerServer).
#
# The server gets its own environment because pytriton's Python-backend stub hands models zeroed
# input tensors under numpy 2, while the client is meant to run on numpy 2; --no-deps keeps
# pytriton's own client dependencies (tritonclient, ...) out, since only the server binary and
# the backend are used.
#
# Idempotent: each environment records what was installed in a marker file and is left alone
# while that still matches (and a quick check passes), so reruns take about a second.
#
# Environment: PYTHON (interpreter to build the environments with; default python3.11, else
# python3), FORCE=1 (reinstall them all), SKIP_TRITON=1 (no .venv-triton), SKIP_PEERS=1 (no
# .venv-kserve and .venv-mlserver; their tests then skip, or fail under CI=true).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

MARKER=".kserve-v2-setup"
TRITON_SPEC="nvidia-pytriton==0.7.0"
SERVER_NUMPY_SPEC="numpy<2"
CLIENT_NUMPY_SPEC="numpy>=2"
CLIENT_EXTRAS="test,httpx,grpc,dev,uvloop"

export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1 PIP_PROGRESS_BAR=off

log() { printf 'setup: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

pick_python() {
    if [[ -n "${PYTHON:-}" ]]; then
        command -v "$PYTHON" >/dev/null || die "PYTHON=$PYTHON not found"
        echo "$PYTHON"
    elif command -v python3.11 >/dev/null; then
        echo python3.11
    elif command -v python3 >/dev/null; then
        echo python3
    else
        die "no python3.11 or python3 on PATH (set PYTHON=...)"
    fi
}

PY="$(pick_python)"
"$PY" -c 'import sys; sys.exit(sys.version_info < (3, 10))' \
    || die "$PY is $("$PY" -V 2>&1); kserve-v2 needs Python >= 3.10"

# make_venv DIR: create DIR as a virtual environment unless a working one is there.
make_venv() {
    local dir="$1"
    if [[ -x "$dir/bin/python" ]] && "$dir/bin/python" -c 'import pip' >/dev/null 2>&1; then
        return
    fi
    log "creating $dir with $("$PY" -V 2>&1)"
    rm -rf "$dir"
    if ! "$PY" -m venv "$dir" >/dev/null 2>&1; then
        # Debian-style Pythons without ensurepip (python3-venv missing): fall back to virtualenv.
        rm -rf "$dir"
        log "'$PY -m venv' failed; using virtualenv instead"
        "$PY" -m virtualenv --version >/dev/null 2>&1 \
            || "$PY" -m pip install --user --quiet virtualenv \
            || die "cannot create virtual environments: install python3-venv or virtualenv"
        "$PY" -m virtualenv --quiet "$dir"
    fi
}

# fingerprint DIR WORDS...: what the environment DIR must have been installed from, and with
# which interpreter.
fingerprint() {
    local dir="$1" version=none
    shift
    if [[ -x "$dir/bin/python" ]]; then
        version="$("$dir/bin/python" -c 'import sys; print(sys.version.split()[0])' 2>/dev/null)" \
            || version=broken
    fi
    printf '%s\n' "$@" "python=$version"
}

up_to_date() { # DIR CHECK-COMMAND... (reads the wanted fingerprint from $want)
    local dir="$1"
    shift
    [[ "${FORCE:-0}" != 1 ]] && [[ -f "$dir/$MARKER" ]] \
        && [[ "$(cat "$dir/$MARKER")" == "$(fingerprint "$dir" "${want[@]}")" ]] \
        && "$@" >/dev/null 2>&1
}

# -- client environment ---------------------------------------------------------------------------
pyproject_hash="$("$PY" -c 'import hashlib, sys
print(hashlib.sha256(open(sys.argv[1], "rb").read()).hexdigest())' pyproject.toml)"
want=("pip install -e .[$CLIENT_EXTRAS] $CLIENT_NUMPY_SPEC" "pyproject.toml=$pyproject_hash")
if up_to_date .venv .venv/bin/python -c \
    'import kserve_v2, numpy, pytest; assert int(numpy.__version__.split(".")[0]) >= 2'; then
    log ".venv is up to date"
else
    make_venv .venv
    rm -f ".venv/$MARKER"
    log "installing kserve-v2[$CLIENT_EXTRAS] into .venv"
    .venv/bin/python -m pip install --quiet --upgrade pip
    .venv/bin/python -m pip install --quiet -e ".[$CLIENT_EXTRAS]" "$CLIENT_NUMPY_SPEC"
    fingerprint .venv "${want[@]}" >".venv/$MARKER"
fi
# The pinned stub generator (grpcio-tools 1.62.3, kept in .work/) for the proto drift test.
.venv/bin/python scripts/gen_protos.py --install-tools

# -- browser ----------------------------------------------------------------------------------------
# The conformance suite's HTML report is checked in headless Chromium. CI installs Debian's
# chromium when it is missing (the test fails there without it); elsewhere the test is skipped
# with a loud reason, and nothing is installed behind the user's back.
in_ci() { [[ -n "${CI:-}" && "${CI,,}" != "false" && "${CI}" != "0" && "${CI,,}" != "no" ]]; }
if in_ci && ! command -v chromium >/dev/null && ! command -v chromium-browser >/dev/null; then
    if command -v apt-get >/dev/null && [[ "$(id -u)" == 0 ]]; then
        log "installing chromium (the conformance report test opens the HTML report in it)"
        apt-get update -qq >/dev/null
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
    else
        log "warning: chromium is missing and cannot be installed here (needs root and apt-get)"
    fi
fi

# -- Locust environment -----------------------------------------------------------------------
want=("pip install -e .[locust,grpc] $CLIENT_NUMPY_SPEC" "pyproject.toml=$pyproject_hash")
if up_to_date .venv-locust .venv-locust/bin/python -c 'import kserve_v2, locust, gevent'; then
    log ".venv-locust is up to date"
else
    make_venv .venv-locust
    rm -f ".venv-locust/$MARKER"
    # Out of `git status` without an entry in the project's .gitignore.
    printf '*\n' >.venv-locust/.gitignore
    log "installing kserve-v2[locust,grpc] into .venv-locust"
    .venv-locust/bin/python -m pip install --quiet --upgrade pip
    .venv-locust/bin/python -m pip install --quiet -e ".[locust,grpc]" "$CLIENT_NUMPY_SPEC"
    fingerprint .venv-locust "${want[@]}" >".venv-locust/$MARKER"
fi

# -- KServe and MLServer environments ---------------------------------------------------------
# peer_env DIR LOCKFILE DISTRIBUTION: DIR holds exactly LOCKFILE's packages.
peer_env() {
    local dir="$1" lock="$2" dist="$3" lock_hash
    lock_hash="$("$PY" -c 'import hashlib, sys
print(hashlib.sha256(open(sys.argv[1], "rb").read()).hexdigest())' "$lock")"
    want=("pip install --no-deps -r $lock" "$lock=$lock_hash")
    # Cheap check (no import of the server): the distribution's metadata is there.
    if up_to_date "$dir" bash -c "compgen -G '$dir/lib/python3.*/site-packages/$dist-*.dist-info'"
    then
        log "$dir is up to date"
        return
    fi
    # From scratch: a package the old list had and the new one lacks must not linger.
    rm -rf "$dir"
    make_venv "$dir"
    log "installing $lock into $dir"
    # A current pip installs the 70 wheels about a third faster than the bundled one.
    "$dir/bin/python" -m pip install --quiet --upgrade pip
    # Every package is pinned, so no resolution is needed; --no-deps keeps it at that list.
    "$dir/bin/python" -m pip install --quiet --no-deps -r "$lock"
    "$dir/bin/python" -m pip check >/dev/null || die "$dir: inconsistent after installing $lock"
    fingerprint "$dir" "${want[@]}" >"$dir/$MARKER"
}

if [[ "${SKIP_PEERS:-0}" == 1 ]]; then
    log "SKIP_PEERS=1: not touching .venv-kserve and .venv-mlserver"
else
    peer_env .venv-kserve tests/peers/kserve-requirements.txt kserve
    peer_env .venv-mlserver tests/peers/mlserver-requirements.txt mlserver
fi

# -- Triton environment ---------------------------------------------------------------------------
if [[ "${SKIP_TRITON:-0}" == 1 ]]; then
    log "SKIP_TRITON=1: not touching .venv-triton"
    exit 0
fi
want=("pip install $SERVER_NUMPY_SPEC" "pip install --no-deps $TRITON_SPEC")
server_check=(.venv-triton/bin/python -c '
import glob, sys, numpy
assert int(numpy.__version__.split(".")[0]) < 2
sys.exit(not glob.glob(sys.prefix + "/lib/python3.*/site-packages/pytriton/tritonserver/bin/tritonserver"))
')
if up_to_date .venv-triton "${server_check[@]}"; then
    log ".venv-triton is up to date"
else
    case "$(uname -s)-$(uname -m)" in
        Linux-x86_64 | Linux-aarch64) ;;
        *) die "nvidia-pytriton ships Triton for Linux x86_64/aarch64 only, not $(uname -sm)" ;;
    esac
    make_venv .venv-triton
    rm -f ".venv-triton/$MARKER"
    log "installing $SERVER_NUMPY_SPEC and $TRITON_SPEC (--no-deps) into .venv-triton"
    .venv-triton/bin/python -m pip install --quiet --upgrade pip
    # numpy first and on its own: pytriton is installed without dependencies, so nothing may
    # pull numpy 2 in later.
    .venv-triton/bin/python -m pip install --quiet "$SERVER_NUMPY_SPEC"
    .venv-triton/bin/python -m pip install --quiet --no-deps "$TRITON_SPEC"
    "${server_check[@]}" || die ".venv-triton is incomplete after installation"
    fingerprint .venv-triton "${want[@]}" >".venv-triton/$MARKER"
fi

# The Python-backend stub links the interpreter's shared libpython; an interpreter built
# without --enable-shared cannot run Python models. ldd tells (when it is installed).
if command -v ldd >/dev/null; then
    missing="$(.venv/bin/python - <<'EOF'
import os, subprocess
from kserve_v2.testing import find_triton_env

env = find_triton_env(".venv-triton")
paths = [str(env.libs_dir)] + ([str(env.python_libdir)] if env.python_libdir else [])
ld = os.pathsep.join(filter(None, [os.environ.get("LD_LIBRARY_PATH"), *paths]))
out = subprocess.run(["ldd", str(env.python_stub)], capture_output=True, text=True,
                     env={**os.environ, "LD_LIBRARY_PATH": ld}).stdout
print(" ".join(line.split()[0] for line in out.splitlines() if "not found" in line))
EOF
)"
    if [[ -n "$missing" ]]; then
        die "the Triton Python-backend stub cannot find: $missing (a libpython3.X.so.1.0 means" \
            "$PY was built without --enable-shared: use a Python that ships libpython, e.g." \
            "the distribution's python3.11, via PYTHON=... FORCE=1)"
    fi
fi
if [[ "${SKIP_PEERS:-0}" == 1 ]]; then
    log "done: .venv (client) and .venv-triton (Triton server) are ready"
else
    log "done: .venv (client), .venv-triton (Triton), .venv-kserve and .venv-mlserver are ready"
fi
