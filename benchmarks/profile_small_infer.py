"""Where kserve-v2's client CPU goes on a small infer: cProfile over N sync infers.

    .venv/bin/python benchmarks/profile_small_infer.py [-n 5000] [--top 30] [--url http://...]
    .venv-bench/bin/python benchmarks/profile_small_infer.py --client tritonclient  # to compare

Without ``--url`` a local Triton (``tests/models``, model ``simple`` only) is started and its
HTTP endpoint used (``--protocol grpc``: its gRPC one). The run does the ``http-small`` /
``grpc-small`` scenario's work (two [1,16] INT32 inputs, both outputs requested in binary form
and turned into numpy arrays): first unprofiled, for the plain CPU µs per request, then under
cProfile. Printed: the top functions by cumulative and by own (total) time with
their µs per request, and own time summed per source file, so the share of kserve_v2, the
standard library (json, ...), C functions (socket calls, isinstance, ...) and numpy is visible
at a glance. The profile's timer is wall time by default (``--timer cpu`` for CPU time): the
socket calls' own time then includes the wait for the server, every other function's is close
to its CPU cost. cProfile adds its own overhead per call, so the profiled µs are higher than the
plain ones, and functions with many cheap calls look costlier than they are. ``--save FILE``
keeps the raw stats (pstats).
"""

from __future__ import annotations

import argparse
import cProfile
import importlib
import io
import pstats
import resource
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent


@contextmanager
def _server_url(url: str | None, protocol: str) -> Iterator[str]:
    if url is not None:
        yield url
        return
    from kserve_v2.testing import TritonServer

    with TritonServer(
        ROOT / "tests" / "models", model_control_mode="explicit", load_models=["simple"]
    ) as server:
        yield server.http_url if protocol == "http" else f"grpc://{server.grpc_url}"


INPUTS = {
    "INPUT0": np.arange(16, dtype=np.int32).reshape(1, 16),
    "INPUT1": np.ones((1, 16), dtype=np.int32),
}
OUTPUTS = ["OUTPUT0", "OUTPUT1"]


@contextmanager
def _kserve_op(url: str) -> Iterator[tuple[str, Callable[[], list[Any]]]]:
    import kserve_v2

    with kserve_v2.Client(url) as client:

        def op() -> list[Any]:
            result = client.infer("simple", INPUTS, outputs=OUTPUTS)
            return [result.as_numpy(name) for name in OUTPUTS]

        yield f"kserve-v2 {kserve_v2.version.__version__}", op


@contextmanager
def _tritonclient_op(url: str) -> Iterator[tuple[str, Callable[[], list[Any]]]]:
    """The same work with tritonclient.http or .grpc (for comparison; needs .venv-bench)."""
    from importlib.metadata import version

    scheme, _, address = url.rpartition("://")
    module = importlib.import_module(
        "tritonclient.grpc" if scheme == "grpc" else "tritonclient.http"
    )
    client = module.InferenceServerClient(address)
    try:

        def op() -> list[Any]:
            inputs = []
            for name, array in INPUTS.items():
                tensor = module.InferInput(name, [1, 16], "INT32")
                tensor.set_data_from_numpy(array)
                inputs.append(tensor)
            outputs = [module.InferRequestedOutput(name) for name in OUTPUTS]
            result = client.infer("simple", inputs, outputs=outputs)
            return [result.as_numpy(name) for name in OUTPUTS]

        yield f"tritonclient {version('tritonclient')}", op
    finally:
        client.close()


def _plain_us(op: Callable[[], object], count: int) -> dict[str, float]:
    """User CPU, system CPU and wall µs per request, without the profiler."""
    before, wall0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    for _ in range(count):
        op()
    wall = time.perf_counter() - wall0
    after = resource.getrusage(resource.RUSAGE_SELF)
    return {
        "user": (after.ru_utime - before.ru_utime) / count * 1e6,
        "system": (after.ru_stime - before.ru_stime) / count * 1e6,
        "wall": wall / count * 1e6,
    }


def _short(path: str, name: str = "") -> str:
    """A source path shortened to the part worth reading (package-relative where possible);
    C functions (path ``~``) are named instead."""
    if path == "~":
        return f"built-in {name}"
    for marker in ("/site-packages/", f"{ROOT}/", "/lib/python3."):
        if marker in path:
            tail = path.split(marker, 1)[1]
            return tail.split("/", 1)[1] if marker == "/lib/python3." else tail
    return path


def _print_top(stats: pstats.Stats, sort: str, top: int, count: int) -> None:
    """The top ``top`` functions by ``sort``, with µs per request."""
    raw: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
    index = {"cumulative": 3, "tottime": 2}[sort]
    rows = sorted(raw.items(), key=lambda item: item[1][index], reverse=True)[:top]
    print(f"\n== top {top} by {sort} time (µs per request; calls per request)")
    print(f"{'cum µs':>9} {'own µs':>9} {'calls':>7}  function")
    for (path, line, name), (_cc, ncalls, tottime, cumtime, _callers) in rows:
        print(
            f"{cumtime / count * 1e6:9.1f} {tottime / count * 1e6:9.1f} "
            f"{ncalls / count:7.1f}  "
            + (_short(path, name) if path == "~" else f"{_short(path)}:{line}({name})")
        )


def _print_by_file(stats: pstats.Stats, top: int, count: int) -> None:
    raw: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
    per_file: dict[str, float] = defaultdict(float)
    for (path, _line, name), (_cc, _nc, tottime, _cum, _callers) in raw.items():
        per_file[_short(path, name)] += tottime
    total = sum(per_file.values())
    print(
        f"\n== own time per source file, C functions apart "
        f"(µs per request; share of {total / count * 1e6:.0f} µs)"
    )
    for path, tottime in sorted(per_file.items(), key=lambda item: item[1], reverse=True)[:top]:
        print(f"{tottime / count * 1e6:9.1f} {tottime / total:6.1%}  {path}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("-n", "--requests", type=int, default=5000, help="profiled infers")
    parser.add_argument("--warmup", type=int, default=200, help="unprofiled infers first")
    parser.add_argument("--top", type=int, default=30, help="rows per listing")
    parser.add_argument(
        "--url", default=None, help="an already running server (http://... or grpc://...)"
    )
    parser.add_argument(
        "--protocol",
        choices=("http", "grpc"),
        default="http",
        help="the protocol of the local server's endpoint to use (without --url)",
    )
    parser.add_argument(
        "--timer",
        choices=("wall", "cpu"),
        default="wall",
        help="profile wall time (default; the wait for the server shows up in recv_into/poll) "
        "or CPU time (excludes the wait, but the profiler's overhead inflates every function)",
    )
    parser.add_argument(
        "--client",
        choices=("kserve-v2", "tritonclient"),
        default="kserve-v2",
        help="the client to profile (tritonclient, for comparison, needs .venv-bench)",
    )
    parser.add_argument("--save", type=Path, default=None, help="write the pstats data here")
    args = parser.parse_args(argv)

    make_op = _kserve_op if args.client == "kserve-v2" else _tritonclient_op
    with _server_url(args.url, args.protocol) as url, make_op(url) as (label, op):
        for _ in range(args.warmup):
            op()
        plain = _plain_us(op, args.requests)
        print(
            f"{label} small infer against {url}, "
            f"{args.requests} requests without the profiler: "
            f"{plain['user'] + plain['system']:.1f} µs CPU per request "
            f"({plain['user']:.1f} user + {plain['system']:.1f} system), "
            f"{plain['wall']:.1f} µs wall"
        )
        # Wall time (cProfile's default) is cheap to read, so the profiler distorts little;
        # the wait for the server lands in the socket calls' own time. A CPU-time timer
        # excludes that wait but costs a system call per reading, inflating every function.
        timer = time.process_time if args.timer == "cpu" else time.perf_counter
        profiler = cProfile.Profile(timer)
        profiler.enable()
        for _ in range(args.requests):
            op()
        profiler.disable()

    stats = pstats.Stats(profiler, stream=io.StringIO())
    calls = stats.total_calls  # type: ignore[attr-defined]
    print(f"{calls / args.requests:.0f} function calls per request (Python and C)")
    if args.save is not None:
        stats.dump_stats(args.save)
    _print_top(stats, "cumulative", args.top, args.requests)
    _print_top(stats, "tottime", args.top, args.requests)
    _print_by_file(stats, args.top, args.requests)
    return 0


if __name__ == "__main__":
    sys.exit(main())
