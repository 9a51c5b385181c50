"""The compat layer's names and signatures: pinned by ``api.txt``, and checked against
tritonclient's own where tritonclient is installed (not in ``.venv``; in ``.venv-bench``).

Refresh ``api.txt`` after a deliberate change with
``python -m tests.compat.surface kserve_v2.compat > tests/compat/api.txt``.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.compat.surface import surface

API_TXT = Path(__file__).with_name("api.txt")
ROOT = Path(__file__).resolve().parents[2]

#: tritonclient names the compat layer leaves out on purpose.
NOT_PROVIDED = {
    # Turns a grpcio RpcError into the exception: the layer raises no grpcio errors.
    "def grpc.aio.raise_error_grpc(rpc_error)",
}


def _by_owner(lines: list[str]) -> dict[str, set[str]]:
    """Member lines grouped under the class (or function) line they follow."""
    owners: dict[str, set[str]] = {}
    owner = ""
    for line in lines:
        if line.startswith("  "):
            owners[owner].add(line)
        else:
            owner = line
            owners.setdefault(owner, set())
    return owners


def test_the_surface_is_the_one_in_api_txt() -> None:
    pinned = API_TXT.read_text(encoding="utf-8").splitlines()
    assert surface("kserve_v2.compat") == pinned


def test_every_tritonclient_module_is_there() -> None:
    owners = _by_owner(API_TXT.read_text(encoding="utf-8").splitlines())
    for name in (
        "class http.InferenceServerClient",
        "class http.aio.InferenceServerClient",
        "class grpc.InferenceServerClient",
        "class grpc.aio.InferenceServerClient",
        "class utils.InferenceServerException (exception)",
        "def utils.shared_memory.create_shared_memory_region(triton_shm_name, shm_key, "
        "byte_size, create_only=False)",
        "def utils.cuda_shared_memory.create_shared_memory_region(triton_shm_name, byte_size, "
        "device_id)",
    ):
        assert name in owners


def test_tritonclient_calls_have_the_same_signatures_here() -> None:
    pytest.importorskip("tritonclient.http", reason="tritonclient is not installed here")
    pytest.importorskip("tritonclient.grpc", reason="tritonclient[grpc] is not installed here")
    theirs = _by_owner(surface("tritonclient"))
    ours = _by_owner(surface("kserve_v2.compat"))
    problems = []
    for owner, members in theirs.items():
        if owner in NOT_PROVIDED or owner.endswith("not importable (RuntimeError)"):
            continue  # the CUDA module needs cuda-python on tritonclient's side
        if owner not in ours:
            problems.append(f"missing: {owner}")
            continue
        problems += [f"{owner}: missing or different: {m.strip()}" for m in members - ours[owner]]
    assert not problems, "\n".join(problems)


def test_the_layer_imports_neither_tritonclient_nor_gevent() -> None:
    code = (
        "import sys\n"
        "import kserve_v2.compat.http, kserve_v2.compat.http.aio, kserve_v2.compat.grpc\n"
        "import kserve_v2.compat.grpc.aio, kserve_v2.compat.utils\n"
        "import kserve_v2.compat.utils.shared_memory, kserve_v2.compat.utils.cuda_shared_memory\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('tritonclient', 'gevent', 'geventhttpclient', 'grpc')))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()
    assert out == "[]"  # grpcio too: the default gRPC transport is the native one
