"""Does ``kserve-v2 perf`` measure what the benchmark harness measures? A documented check,
not a test (timings have no place in tests).

    .venv/bin/python benchmarks/cli_perf_check.py                 # starts its own Triton
    .venv/bin/python benchmarks/cli_perf_check.py --rounds 5 --seconds 4

For each fixed scenario of ``benchmarks/scenarios.py`` that perf can reproduce (model
``simple``, the two [1,16] INT32 inputs the harness sends, both outputs binary, one request
after another or 16 in flight), it runs, interleaved for ``--rounds`` rounds, the harness's
own worker (``benchmarks/workers.py``, the kserve-v2 client, a fixed number of requests sized to
about ``--seconds``) and ``kserve-v2 perf`` (time windows of ``--seconds``, stability 10 %),
each in a fresh process, and compares the medians of their requests/s. The noise is the
spread of the harness's own rounds; the check passes when perf's median lies within the
larger of 10 % and twice that spread of the harness's median.

At concurrency 1 the harness drives the synchronous client and perf the asyncio one (perf
always runs asyncio, like the harness's concurrency-16 scenarios), so a few percent between
the two are expected there. The harness's worker reads its RSS with psutil; without psutil in
this interpreter (it is in ``.venv-bench``) a shim reading ``/proc/self/statm`` stands in.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

#: (harness scenario, perf concurrency, protocol)
SCENARIOS = (("http-small", 1, "http"), ("http-async-16", 16, "http"), ("grpc-small", 1, "grpc"))
SIMPLE_INPUTS = (
    "INPUT0=[[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15]]:INT32",
    "INPUT1=[[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1]]:INT32",
)
_PSUTIL_SHIM = '''"""psutil stand-in for benchmarks/workers.py: RSS from /proc/self/statm."""
import os


class _Memory:
    def __init__(self, rss):
        self.rss = rss


class Process:
    def memory_info(self):
        with open("/proc/self/statm") as f:
            pages = int(f.read().split()[1])
        return _Memory(pages * os.sysconf("SC_PAGE_SIZE"))
'''


def _env_with_psutil(shim_dir: str) -> dict[str, str]:
    env = dict(os.environ)
    import importlib.util

    if importlib.util.find_spec("psutil") is None:
        Path(shim_dir, "psutil.py").write_text(_PSUTIL_SHIM)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (shim_dir, env.get("PYTHONPATH")) if p)
    return env


def harness_rate(scenario: str, http: str, grpc: str, requests: int, env: dict[str, str]) -> float:
    spec = {
        "scenario": scenario,
        "client": "kserve-v2",
        "http_url": http,
        "grpc_url": grpc,
        "requests": requests,
        "warmup": 200,
    }
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "workers.py"), json.dumps(spec)],
        cwd=ROOT, env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    result = json.loads(proc.stdout)
    return float(result["requests"]) / float(result["wall_s"])


def perf_rate(url: str, concurrency: int, seconds: float) -> float:
    args = [sys.executable, "-m", "kserve_v2", "perf", "simple", "--url", url,
            "--concurrency", str(concurrency), "--measurement-interval", str(seconds * 1000),
            "--max-trials", "6", "-o", "OUTPUT0", "-o", "OUTPUT1", "-q", "--json"]  # fmt: skip
    for value in SIMPLE_INPUTS:
        args += ["-i", value]
    proc = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, check=True)
    (step,) = json.loads(proc.stdout)["steps"]
    return float(step["requests_per_s"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=3.0, help="length of each run")
    parser.add_argument("--only", action="append", default=[], help="scenario names")
    args = parser.parse_args()

    from kserve_v2 import Client
    from kserve_v2.testing import TritonServer

    chosen = [s for s in SCENARIOS if not args.only or s[0] in args.only]
    failed = False
    with TritonServer(ROOT / "tests" / "models") as server, tempfile.TemporaryDirectory() as tmp:
        env = _env_with_psutil(tmp)
        http, grpc = server.http_url, server.grpc_url
        import numpy as np

        with Client(http) as client:  # warm the model up
            ones = np.ones((1, 16), np.int32)
            for _ in range(50):
                client.infer("simple", {"INPUT0": ones, "INPUT1": ones})
        print(f"{'scenario':<16} {'harness req/s':>14} {'perf req/s':>11} {'ratio':>6}  verdict")
        for scenario, concurrency, protocol in chosen:
            url = http if protocol == "http" else f"grpc://{grpc}"
            # Size the harness's run to about --seconds from a first perf estimate.
            estimate = perf_rate(url, concurrency, 1.0)
            requests = max(500, int(estimate * args.seconds))
            harness, perf = [], []
            for _ in range(args.rounds):
                harness.append(harness_rate(scenario, http, grpc, requests, env))
                perf.append(perf_rate(url, concurrency, args.seconds))
            h, p = statistics.median(harness), statistics.median(perf)
            spread = (max(harness) - min(harness)) / h if h else 0.0
            tolerance = max(0.10, 2 * spread)
            ok = abs(p / h - 1) <= tolerance
            failed |= not ok
            print(
                f"{scenario:<16} {h:>14,.0f} {p:>11,.0f} {p / h:>6.2f}  "
                f"{'agrees' if ok else 'DIFFERS'} (tolerance {tolerance:.0%}; harness rounds "
                f"{', '.join(f'{x:,.0f}' for x in harness)}; perf rounds "
                f"{', '.join(f'{x:,.0f}' for x in perf)})"
            )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
