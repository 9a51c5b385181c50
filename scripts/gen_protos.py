#!/usr/bin/env python3
"""Regenerate the committed gRPC stubs in ``kserve_v2/grpc/_generated/`` from ``protos/``.

Usage::

    python scripts/gen_protos.py --install-tools  # once: fetch the pinned grpcio-tools
    python scripts/gen_protos.py                  # regenerate in place
    python scripts/gen_protos.py --out DIR        # write elsewhere (the drift test does)

Why a pinned, old generator: generated code is tied to runtime versions, and the committed
stubs are what every user imports. What each grpcio-tools release emits (checked by
generating these protos with each):

* 1.62.3: protoc 25.1 ("Protobuf Python Version: 4.25.1"); no version check in either file.
* 1.63-1.65: protobuf 5.26.1 gencode, still no check in ``*_pb2.py``; ``*_pb2_grpc.py``
  gets ``GRPC_GENERATED_VERSION`` and warns (RuntimeWarning) on older grpcio.
* 1.66 and later: ``*_pb2.py`` calls ``ValidateProtobufRuntimeVersion(...)`` (5.27.2 for
  1.66, 5.28.1 for 1.68, 6.30.0 for 1.72, 6.31.1 for 1.76, ...) and fails to import on an
  older protobuf; ``*_pb2_grpc.py`` raises RuntimeError on grpcio older than the generator.

So 1.62.3 gives the lowest floors with no import-time checks: its output is tested on
protobuf 4.25.1 + grpcio 1.62.3 and on the newest releases (protobuf 7.x, grpcio 1.85).
That gives the ``grpc`` extra its floors (see pyproject.toml).

The pinned grpcio-tools pulls protobuf<5 as a dependency, which must not replace the newer
protobuf of the development environment. So unless the running interpreter already has
exactly the pinned version, the script runs it from a private ``--target`` directory under
``.work/`` (git-ignored), installed there with ``--no-deps`` by ``--install-tools``: protoc's
code generators are self-contained C++ and need neither protobuf nor grpcio at generation
time.

Two rewrites make the output a self-contained package:

* protoc emits top-level imports (``import grpc_service_pb2``); they become package-relative
  (``from . import grpc_service_pb2``).
* protoc registers every file in protobuf's process-wide default descriptor pool, where a
  file name or a message full name may exist only once. tritonclient (used side by side in
  the benchmarks, and by users migrating) registers its own, differing ``grpc_service.proto``
  and ``model_config.proto`` there (importing both fails with "duplicate file name" in either
  order, checked with tritonclient 2.73.0), and grpcio-health-checking its own
  ``grpc.health.v1`` messages. So the stubs are registered in a private pool
  (``_generated/_pool.py``) instead.

"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

#: The grpcio-tools release that generates the committed stubs (see the module docstring).
PINNED_GRPCIO_TOOLS = "1.62.3"

REPO_ROOT = Path(__file__).resolve().parent.parent
PROTO_DIR = REPO_ROOT / "protos"
OUT_DIR = REPO_ROOT / "kserve_v2" / "grpc" / "_generated"

#: .proto files compiled, in this order. Only the first and last define services.
PROTO_FILES = ("grpc_service.proto", "model_config.proto", "health.proto")
SERVICE_PROTOS = ("grpc_service.proto", "health.proto")

INIT_TEMPLATE = '''"""Generated from ``protos/*.proto`` by ``scripts/gen_protos.py``. Do not edit.

Generator: grpcio-tools=={version}. Regenerate with ``python scripts/gen_protos.py``;
``tests/grpc/test_generated.py`` fails when these files drift from ``protos/``.
"""

GENERATOR = "grpcio-tools=={version}"
'''

POOL_MODULE = '''"""Private descriptor pool of the generated stubs (see ``scripts/gen_protos.py``).

Keeps ``inference.*`` and ``grpc.health.v1.*`` out of protobuf's process-wide default pool,
so these stubs coexist with other copies of the same protos (tritonclient, pytriton, ...).
"""

from google.protobuf import descriptor_pool

POOL = descriptor_pool.DescriptorPool()
'''


def tools_cache_dir() -> Path:
    """Private install directory for the pinned grpcio-tools (one per Python ABI)."""
    abi = sysconfig.get_config_var("SOABI") or f"py{sys.version_info[0]}{sys.version_info[1]}"
    return REPO_ROOT / ".work" / "gen-tools" / f"grpcio-tools-{PINNED_GRPCIO_TOOLS}-{abi}"


def _installed_tools_version() -> str | None:
    try:
        return importlib.metadata.version("grpcio-tools")
    except importlib.metadata.PackageNotFoundError:
        return None


def protoc_command() -> tuple[list[str], dict[str, str]] | None:
    """Command prefix and environment that run the pinned ``grpc_tools.protoc``, or None."""
    env = dict(os.environ)
    if _installed_tools_version() == PINNED_GRPCIO_TOOLS:
        return [sys.executable, "-m", "grpc_tools.protoc"], env
    cache = tools_cache_dir()
    if (cache / f"grpcio_tools-{PINNED_GRPCIO_TOOLS}.dist-info").is_dir():
        # PYTHONPATH entries come before site-packages, so this copy shadows any other
        # grpcio-tools installed in the environment.
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(cache), env.get("PYTHONPATH")]))
        return [sys.executable, "-m", "grpc_tools.protoc"], env
    return None


def missing_tools_message() -> str:
    """How to get the pinned generator, for the error message and the skipped test."""
    found = _installed_tools_version()
    return (
        f"grpcio-tools=={PINNED_GRPCIO_TOOLS} is needed to generate the stubs "
        f"(installed here: {found or 'none'}). Run "
        f"'python scripts/gen_protos.py --install-tools' to put it in {tools_cache_dir()} "
        f"without touching this environment's protobuf, then run this again."
    )


def install_tools() -> None:
    """pip-install the pinned grpcio-tools into the private cache directory (wheel only)."""
    cache = tools_cache_dir()
    cmd = [
        sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
        "--no-deps", "--only-binary=:all:", "--target", str(cache),
        f"grpcio-tools=={PINNED_GRPCIO_TOOLS}",
    ]  # fmt: skip
    print("+", " ".join(cmd), flush=True)
    if cache.exists():
        shutil.rmtree(cache)
    subprocess.run(cmd, check=True)


# `import grpc_service_pb2 as grpc__service__pb2` -> `from . import grpc_service_pb2 as ...`
_ABS_IMPORT = re.compile(r"^import (\w+_pb2) as (\w+)$", re.MULTILINE)
_ABS_FROM = re.compile(r"^from (\w+_pb2) import ", re.MULTILINE)
_DEFAULT_POOL = "_descriptor_pool.Default().AddSerializedFile("
_BUILDER_IMPORT = "from google.protobuf.internal import builder as _builder\n"


def _make_relative(text: str, local_modules: set[str]) -> str:
    def repl_import(m: re.Match[str]) -> str:
        if m.group(1) in local_modules:
            return f"from . import {m.group(1)} as {m.group(2)}"
        return m.group(0)

    def repl_from(m: re.Match[str]) -> str:
        if m.group(1) in local_modules:
            return f"from .{m.group(1)} import "
        return m.group(0)

    return _ABS_FROM.sub(repl_from, _ABS_IMPORT.sub(repl_import, text))


def _use_private_pool(text: str, name: str) -> str:
    if name.endswith("_pb2.py"):
        # Exactly one registration and one anchor for the import, or protoc's output format
        # changed and this rewrite must be revisited.
        if text.count(_DEFAULT_POOL) != 1 or text.count(_BUILDER_IMPORT) != 1:
            raise SystemExit(f"unexpected protoc output in {name}: cannot redirect its pool")
        text = text.replace(_DEFAULT_POOL, "_pool.POOL.AddSerializedFile(")
        text = text.replace(_BUILDER_IMPORT, _BUILDER_IMPORT + "from . import _pool\n")
    return text


def generate(out_dir: Path) -> list[Path]:
    """Generate the stubs into ``out_dir`` (replacing its generated files); return them."""
    found = protoc_command()
    if found is None:
        raise SystemExit(missing_tools_message())
    prefix, env = found
    with tempfile.TemporaryDirectory(prefix="kserve-v2-protoc-") as tmp:
        base = [*prefix, f"-I{PROTO_DIR}"]
        runs = [
            [*base, f"--python_out={tmp}", f"--pyi_out={tmp}", *PROTO_FILES],
            [*base, f"--grpc_python_out={tmp}", *SERVICE_PROTOS],
        ]
        for cmd in runs:
            proc = subprocess.run(cmd, cwd=PROTO_DIR, env=env, capture_output=True, text=True)
            if proc.returncode != 0:
                raise SystemExit(f"protoc failed ({' '.join(cmd)}):\n{proc.stderr}")
        produced = sorted(Path(tmp).iterdir())
        local = {p.name.split(".")[0] for p in produced if p.name.endswith("_pb2.py")}
        out_dir.mkdir(parents=True, exist_ok=True)
        # Remove stale outputs (e.g. of a deleted .proto) but nothing else.
        for old in out_dir.glob("*_pb2*.py*"):
            old.unlink()
        written = []
        for src in produced:
            dst = out_dir / src.name
            dst.write_text(_use_private_pool(_make_relative(src.read_text(), local), src.name))
            written.append(dst)
    for fname, content in (
        ("__init__.py", INIT_TEMPLATE.format(version=PINNED_GRPCIO_TOOLS)),
        ("_pool.py", POOL_MODULE),
    ):
        (out_dir / fname).write_text(content)
        written.append(out_dir / fname)
    return sorted(written)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=OUT_DIR, help="output package directory")
    parser.add_argument(
        "--install-tools",
        action="store_true",
        help=f"only pip-install grpcio-tools=={PINNED_GRPCIO_TOOLS} into {tools_cache_dir()} "
        "(when not already available) and exit; set-up and CI run this before the tests",
    )
    args = parser.parse_args(argv)
    if args.install_tools:
        if protoc_command() is None:
            install_tools()
        print(f"grpcio-tools=={PINNED_GRPCIO_TOOLS} available")
        return 0
    for path in generate(args.out):
        print(path.relative_to(REPO_ROOT) if path.is_relative_to(REPO_ROOT) else path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
