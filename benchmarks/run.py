"""Side-by-side benchmarks of kserve-v2 and tritonclient against one local Triton server.

    bash scripts/bench.sh [--quick] [--only SCENARIO ...] [--rounds N] [--scale F]

(``scripts/bench.sh`` sets up ``.venv-bench``, the only environment holding both clients, and
runs this file with it.) One Triton server (:class:`kserve_v2.testing.TritonServer` on
``tests/models``) serves every scenario. Each scenario runs ``--rounds`` rounds; each round runs
kserve-v2, then tritonclient, each in a fresh worker process (``workers.py``), so the CPU time
and peak RSS of a run belong to one client alone. Reported per scenario and client:

* throughput: requests/s (streamed responses/s for ``grpc-stream``), median over rounds;
* latency p50 / p99 of single requests, over all rounds' requests;
* client CPU per request (per response for streams): the worker's ``time.process_time()`` over
  the timed loop (user + system, all threads) / requests, median over rounds;
* for large tensors, MB/s (10^6 bytes of tensor data sent + received per second), peak RSS
  (the worker's ``ru_maxrss``) and its growth over the RSS measured before the first request;

each with the ratio kserve-v2 / tritonclient, and the project's targets for those ratios
marked met or not. The numbers are the client's costs under a real server on the same machine:
on a busy machine they are noisy, so compare ratios from one run rather than absolute values
across runs. Never used as timed assertions in tests.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scenarios import CLIENTS, MIB, SCENARIOS, Scenario, Target

ROOT = Path(__file__).resolve().parent.parent
WORKER = Path(__file__).resolve().with_name("workers.py")
MODELS = ROOT / "tests" / "models"
WORKER_TIMEOUT_S = 900.0


# -- metrics --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Metric:
    key: str
    label: str


def _metrics(scenario: Scenario) -> list[Metric]:
    unit = "resp" if scenario.kind == "stream" else "req"
    metrics = [
        Metric("units_per_s", f"{unit}/s"),
        Metric("p50_ms", "p50 latency ms" + (" (whole stream)" if unit == "resp" else "")),
        Metric("p99_ms", "p99 latency ms" + (" (whole stream)" if unit == "resp" else "")),
        Metric("cpu_us", f"client CPU µs/{unit}"),
        Metric("sys_us", f"of which system (kernel) µs/{unit}"),
    ]
    if not scenario.large:
        # What a small request's CPU depends on most here: a thread that sleeps between
        # responses, or is preempted by the server, runs cold when it wakes (see README).
        metrics += [
            Metric("sleeps", f"sleeps per {unit} (voluntary context switches)"),
            Metric("preemptions", f"preemptions per {unit} (involuntary context switches)"),
        ]
    if scenario.kind == "stream":
        metrics.append(Metric("model_units_per_s", "the model's own send rate, resp/s"))
    if scenario.large:
        metrics += [
            Metric("mb_per_s", "MB/s (in + out)"),
            Metric("peak_rss_mib", "peak RSS MiB"),
            Metric("rss_growth_mib", "RSS growth MiB (peak - before 1st request)"),
        ]
    return metrics


def _fmt(value: float) -> str:
    """Three significant digits at most, thousands separated."""
    if abs(value) >= 100:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


@dataclass
class Runs:
    """The worker results of one client in one scenario, over the rounds."""

    results: list[dict[str, Any]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def summary(self) -> dict[str, float]:
        if not self.results:
            return {}

        def median(values: Sequence[float]) -> float:
            return float(statistics.median(values))

        latencies_ms = np.concatenate([r["latencies_s"] for r in self.results]) * 1e3
        return {
            "units_per_s": median([r["units"] / r["wall_s"] for r in self.results]),
            "p50_ms": float(np.percentile(latencies_ms, 50)),
            "p99_ms": float(np.percentile(latencies_ms, 99)),
            "cpu_us": median([r["cpu_s"] / r["units"] * 1e6 for r in self.results]),
            "sys_us": median([r["system_s"] / r["units"] * 1e6 for r in self.results]),
            "sleeps": median([r["sleeps"] / r["units"] for r in self.results]),
            "preemptions": median([r["preemptions"] / r["units"] for r in self.results]),
            "mb_per_s": median([r["bytes_moved"] / r["wall_s"] / 1e6 for r in self.results]),
            "peak_rss_mib": median([r["peak_rss"] / MIB for r in self.results]),
            "rss_growth_mib": median(
                [(r["peak_rss"] - r["baseline_rss"]) / MIB for r in self.results]
            ),
            **(
                {
                    "model_units_per_s": median(
                        [r["model_units"] / r["model_send_s"] for r in self.results]
                    )
                }
                if all(r.get("model_send_s") for r in self.results)
                else {}
            ),
            # how much the rounds disagree: (max - min) / median of the CPU per unit
            "cpu_spread": _spread([r["cpu_s"] / r["units"] for r in self.results]),
        }


def _spread(values: Sequence[float]) -> float:
    mid = statistics.median(values)
    return (max(values) - min(values)) / mid if mid else 0.0


# -- running the workers --------------------------------------------------------------------------


def _run_worker(spec: dict[str, Any]) -> dict[str, Any]:
    """One worker process; its JSON result, or ``{"error": ...}``.

    The result comes back in a file, not on stdout: a result is a few hundred KiB (every
    latency), and one came back broken at 64 KiB, where a full pipe splits the write (so
    anything else the worker's libraries print can land inside it)."""
    with tempfile.TemporaryDirectory(prefix="kserve-v2-bench-") as tmp:
        result_file = Path(tmp) / "result.json"
        try:
            proc = subprocess.run(
                [sys.executable, str(WORKER), json.dumps(spec), str(result_file)],
                capture_output=True,
                text=True,
                timeout=WORKER_TIMEOUT_S,
                cwd=ROOT,
            )
        except subprocess.TimeoutExpired:
            return {"error": f"timed out after {WORKER_TIMEOUT_S:.0f} s"}
        if proc.returncode != 0 or not result_file.exists():
            lines = [line for line in proc.stderr.strip().splitlines() if line.strip()]
            return {
                "error": lines[-1] if lines else f"exit status {proc.returncode}, no result",
                "stderr": proc.stderr + proc.stdout[-2000:],
            }
        return dict(json.loads(result_file.read_text()))


def _grpc_unavailable(grpc_url: str) -> str | None:
    """Why kserve-v2's gRPC client cannot be benchmarked yet (None when it can)."""
    import kserve_v2

    try:
        with kserve_v2.Client(f"grpc://{grpc_url}") as client:
            if not client.is_server_live():
                return "kserve_v2.Client('grpc://...').is_server_live() returned False"
    except Exception as exc:  # whatever the half-built backend raises
        return f"kserve_v2.Client('grpc://...') does not work yet ({type(exc).__name__}: {exc})"
    return None


def _stream_unavailable() -> str | None:
    import kserve_v2

    if not hasattr(kserve_v2.Client, "stream"):
        return "kserve_v2.Client has no stream() yet"
    return None  # a stream that fails shows as an error of the kserve-v2 runs


# -- the report -----------------------------------------------------------------------------------


def _ratio_cell(ratio: float | None) -> str:
    return "-" if ratio is None else f"{ratio:.2f}x"


def _target_cells(targets: Sequence[Target], metric: Metric, ratio: float | None) -> list[str]:
    for target in targets:
        if target.metric == metric.key:
            if ratio is None:
                return [str(target), "n/a"]
            return [str(target), "met" if target.met(ratio) else "**not met**"]
    return ["", ""]


def _table(
    scenarios: Sequence[Scenario],
    runs: dict[tuple[str, str], Runs],
    skipped: dict[str, str],
) -> list[str]:
    lines = [
        "| scenario | metric | kserve-v2 | tritonclient | ratio | target | |",
        "| --- | --- | ---: | ---: | ---: | --- | --- |",
    ]
    for scenario in scenarios:
        ours = runs[(scenario.name, CLIENTS[0])]
        theirs = runs[(scenario.name, CLIENTS[1])]
        a, b = ours.summary(), theirs.summary()
        first = True
        for metric in _metrics(scenario):
            name = scenario.name if first else ""
            first = False
            cells = []
            for summary, client_runs in ((a, ours), (b, theirs)):
                if metric.key in summary:
                    cells.append(_fmt(summary[metric.key]))
                elif client_runs.errors:
                    cells.append("error")
                else:
                    cells.append("n/a" if scenario.name in skipped else "-")
            ratio = (
                a[metric.key] / b[metric.key]
                if metric.key in a and metric.key in b and b[metric.key]
                else None
            )
            lines.append(
                f"| {name} | {metric.label} | {cells[0]} | {cells[1]} | "
                f"{_ratio_cell(ratio)} | "
                + " | ".join(_target_cells(scenario.targets, metric, ratio))
                + " |"
            )
    return lines


def _notes(
    scenarios: Sequence[Scenario],
    runs: dict[tuple[str, str], Runs],
    requests: dict[str, int],
    rounds: int,
    skipped: dict[str, str],
) -> list[str]:
    lines = [
        "",
        "Scenarios (requests per worker x rounds; each round: kserve-v2, then tritonclient):",
        "",
    ]
    for reason in dict.fromkeys(skipped.values()):
        names = ", ".join(f"`{name}`" for name, why in skipped.items() if why == reason)
        lines.append(f"- kserve-v2 not run (n/a) in {names}: {reason}; tritonclient alone ran")
    for scenario in scenarios:
        extra = f", {scenario.stream_repeat} responses each" if scenario.kind == "stream" else ""
        lines.append(
            f"- `{scenario.name}`: {scenario.description}; "
            f"{requests[scenario.name]} requests{extra} x {rounds}"
        )
    if any(scenario.kind == "stream" for scenario in scenarios):
        lines.append(
            "- streams: the model's own send rate is what `repeat_decoupled` measured of its"
            " send loops during the timed requests; a client that keeps up receives at that"
            " rate, and then what sets it is the CPU and wake-ups the client leaves the server"
            " (which shares the machine)"
        )
    spreads = []
    for (name, client), client_runs in runs.items():
        for error in dict.fromkeys(client_runs.errors):
            lines.append(f"- **error** in `{name}` / {client}: {error}")
        summary = client_runs.summary()
        if summary and len(client_runs.results) > 1:
            spreads.append(f"{name}/{client} {summary['cpu_spread']:.0%}")
    if spreads:
        lines += [
            "",
            "Round-to-round spread of CPU per request ((max - min) / median): "
            + ", ".join(spreads)
            + ".",
        ]
    return lines


def _header(args: argparse.Namespace, triton_version: str, load_before: float) -> list[str]:
    from importlib.metadata import version

    load_after = os.getloadavg()[0]
    return [
        "# kserve-v2 vs tritonclient",
        "",
        f"Generated by `{' '.join(['bash scripts/bench.sh', *args.argv])}` on "
        f"{time.strftime('%Y-%m-%d %H:%M')}: kserve-v2 {version('kserve-v2')} "
        f"(gRPC transport: {args.grpc_transport}), "
        f"tritonclient {version('tritonclient')}, Triton {triton_version} (CPU), "
        f"Python {platform.python_version()}, numpy {np.__version__}, "
        f"{os.cpu_count()} CPUs, load average {load_before:.1f} before / {load_after:.1f} after.",
        "",
        "Ratio = kserve-v2 / tritonclient (CPU, latency, RSS: lower is better; req/s, MB/s: "
        "higher is better). CPU = the client process's `process_time()` (all threads) over the "
        "timed loop / requests. Server and clients share the machine's CPUs, so with a high "
        "load average the numbers are **preliminary**.",
        "",
    ]


# -- main -----------------------------------------------------------------------------------------


def _parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="kserve-v2 vs tritonclient side by side against one local Triton server.",
    )
    parser.add_argument(
        "--quick", action="store_true", help="a few requests per scenario and 1 round (validation)"
    )
    parser.add_argument(
        "--only",
        action="append",
        metavar="SCENARIO",
        default=[],
        help="run only this scenario (repeatable, or comma-separated); "
        "a prefix like 'http' or 'grpc-identity' selects all that match",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=None,
        help="interleaved rounds per scenario (default 3; 1 with --quick)",
    )
    parser.add_argument(
        "--scale",
        type=float,
        default=1.0,
        help="multiply every scenario's request count (e.g. 5 for a longer run)",
    )
    parser.add_argument(
        "--output", type=Path, default=None, help="also write the markdown report to this file"
    )
    parser.add_argument(
        "--json", type=Path, default=None, help="write every worker's raw result to this file"
    )
    parser.add_argument(
        "--grpc-transport",
        choices=("native", "grpcio"),
        default="native",
        help="kserve-v2's gRPC transport (default: native, the client's default)",
    )
    parser.add_argument("--list", action="store_true", help="list the scenarios and exit")
    args = parser.parse_args(argv)
    args.argv = _without_output(argv)
    if args.rounds is None:
        args.rounds = 1 if args.quick else 3
    if args.rounds < 1 or args.scale <= 0:
        parser.error("--rounds must be >= 1 and --scale > 0")
    return args


def _without_output(argv: Sequence[str]) -> list[str]:
    """The command line as the user gave it to bench.sh (which adds ``--output``)."""
    out: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg == "--output":
            skip = True
        elif not arg.startswith("--output="):
            out.append(arg)
    return out


def _select(only: Sequence[str]) -> list[Scenario]:
    wanted = [w.strip() for item in only for w in item.split(",") if w.strip()]
    if not wanted:
        return list(SCENARIOS)
    selected = [s for s in SCENARIOS if any(s.name == w or s.name.startswith(w) for w in wanted)]
    if not selected:
        known = ", ".join(s.name for s in SCENARIOS)
        raise SystemExit(f"no scenario matches {', '.join(wanted)} (known: {known})")
    return selected


def _kserve_unavailable(scenarios: Sequence[Scenario], grpc_url: str) -> dict[str, str]:
    """Scenarios whose kserve-v2 side cannot run yet, with the reason."""
    if not any(s.protocol == "grpc" for s in scenarios):
        return {}
    grpc_reason = _grpc_unavailable(grpc_url)
    stream_reason = _stream_unavailable()
    out: dict[str, str] = {}
    for scenario in scenarios:
        if scenario.protocol == "grpc" and grpc_reason:
            out[scenario.name] = grpc_reason
        elif scenario.kind == "stream" and stream_reason:
            out[scenario.name] = stream_reason
    return out


def _model_send_times(send_log: Path, timed: int) -> dict[str, float]:
    """What ``repeat_decoupled`` logged of its last ``timed`` requests (the worker's timed
    loop; warm-up requests come first): responses sent and seconds its send loops took."""
    try:
        lines = send_log.read_text("utf-8").split()
    except OSError:
        return {}
    pairs = list(zip(lines[::2], lines[1::2], strict=True))[-timed:]
    if len(pairs) < timed:
        return {}
    return {
        "model_units": float(sum(int(n) for n, _ in pairs)),
        "model_send_s": sum(float(s) for _, s in pairs),
    }


def _run_scenario(
    scenario: Scenario,
    clients: Sequence[str],
    rounds: int,
    base_spec: dict[str, Any],
    send_log: Path,
) -> tuple[dict[str, Runs], list[dict[str, Any]]]:
    """``rounds`` interleaved rounds (each client once per round, in order); the runs of each
    client and every worker's raw result. Stream scenarios also record the model's own send
    rate from ``send_log``."""
    runs = {client: Runs() for client in CLIENTS}
    raw: list[dict[str, Any]] = []
    for round_index in range(rounds):
        for client in clients:
            spec = {**base_spec, "scenario": scenario.name, "client": client}
            send_log.write_text("", "utf-8")
            started = time.monotonic()
            result = _run_worker(spec)
            if scenario.kind == "stream" and "error" not in result:
                result.update(_model_send_times(send_log, spec["requests"]))
            took = time.monotonic() - started
            where = f"{scenario.name} round {round_index + 1}/{rounds} {client}"
            if "error" in result:
                runs[client].errors.append(result["error"])
                log(f"{where}: ERROR {result['error']}")
                if result.get("stderr"):
                    log(result["stderr"].rstrip()[-2000:])
            else:
                runs[client].results.append(result)
                per_unit = result["cpu_s"] / result["units"] * 1e6
                log(
                    f"{where}: {result['units'] / result['wall_s']:,.0f} {scenario.unit}s/s, "
                    f"{per_unit:,.1f} µs CPU/{scenario.unit} ({took:.1f} s)"
                    + (
                        f"; the model sent {result['model_units'] / result['model_send_s']:,.0f}/s"
                        if result.get("model_send_s")
                        else ""
                    )
                )
            raw.append({**spec, **result})
    return runs, raw


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse_args(sys.argv[1:] if argv is None else argv)
    if args.list:
        for scenario in SCENARIOS:
            print(f"{scenario.name:22} {scenario.description}")
        return 0
    scenarios = _select(args.only)
    os.environ["KSERVE_V2_BENCH_GRPC_TRANSPORT"] = args.grpc_transport  # read by the workers
    requests = {
        s.name: max(1, round((s.quick_requests if args.quick else s.requests) * args.scale))
        for s in scenarios
    }

    import kserve_v2
    from kserve_v2.testing import TritonServer

    load_before = os.getloadavg()[0]
    models = sorted({s.model for s in scenarios})
    log(f"starting Triton with {', '.join(models)}")
    runs: dict[tuple[str, str], Runs] = {}
    raw: list[dict[str, Any]] = []
    send_dir = tempfile.TemporaryDirectory(prefix="kserve-v2-bench-")
    # repeat_decoupled logs its send loops there: the model's own rate, next to the client's
    send_log = Path(send_dir.name) / "send.log"
    with (
        send_dir,
        TritonServer(
            MODELS,
            model_control_mode="explicit",
            load_models=models,
            extra_env={"KSERVE_V2_SEND_LOG": str(send_log)},
        ) as server,
    ):
        with kserve_v2.Client(server.http_url) as client:
            triton_version = client.server_metadata().version
        skipped = _kserve_unavailable(scenarios, server.grpc_url)
        for name, reason in skipped.items():
            log(f"{name}: kserve-v2 not run ({reason}); tritonclient only")
        for scenario in scenarios:
            clients = [c for c in CLIENTS if c != "kserve-v2" or scenario.name not in skipped]
            base_spec = {
                "http_url": server.http_url,
                "grpc_url": server.grpc_url,
                "requests": requests[scenario.name],
                "warmup": scenario.warmup,
            }
            scenario_runs, scenario_raw = _run_scenario(
                scenario, clients, args.rounds, base_spec, send_log
            )
            for client_name, client_runs in scenario_runs.items():
                runs[(scenario.name, client_name)] = client_runs
            raw += scenario_raw

    report = "\n".join(
        _header(args, triton_version, load_before)
        + _table(scenarios, runs, skipped)
        + _notes(scenarios, runs, requests, args.rounds, skipped)
    )
    print(report)
    if args.output is not None:
        args.output.write_text(report + "\n", "utf-8")
        log(f"wrote {args.output}")
    if args.json is not None:
        args.json.write_text(json.dumps(raw), "utf-8")
    return 1 if any(r.errors for r in runs.values()) else 0


def log(message: str) -> None:
    print(f"bench: {message}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    sys.exit(main())
