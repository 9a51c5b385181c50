"""Measure a model's throughput and latency, like perf_analyzer: a concurrency sweep or
request rates (constant or Poisson arrivals), over HTTP or gRPC, binary, JSON or
shared-memory tensors, sequence models and streaming (decoupled) models.

Each step of the sweep runs measurement windows (time or count windows) until the last three
agree within --stability percent (or --max-trials windows); its result merges those three.
Per step: throughput, latency p50/p90/p95/p99/avg, the client's send and receive times, and the
server's queue and compute times from its statistics extension (deltas over the windows).
--workers N spreads the load over N processes whose latency histograms merge exactly (fixed
log buckets, not averaged percentiles).

--concurrency and --request-rate take START:END:STEP (perf_analyzer's: STEP added), START:END:xF
(multiplied by F), a list 1,2,8, or one value.

examples:
  kserve-v2 perf simple
  kserve-v2 perf simple --concurrency 1:16:x2 --csv perf.csv --plot perf.png
  kserve-v2 perf simple --request-rate 100:400:100 --distribution poisson --url grpc://localhost:8001
  kserve-v2 perf identity_fp32 --shape INPUT0=1,262144 --shared-memory system
  kserve-v2 perf sequence_accumulate --sequence-length 10 --concurrency 4
  kserve-v2 perf repeat_decoupled -i REPEAT=[10] --streaming --url grpc://localhost:8001
  kserve-v2 perf simple --concurrency 64 --workers 4 --measurement-interval 2000

CSV columns are perf_analyzer's where they mean the same (Concurrency or Request Rate,
Inferences/Second, Client Send, Network+Server Send/Recv, Server Queue, Server Compute
Input/Infer/Output, Client Recv, p50/p90/p95/p99 latency, Avg latency: microseconds), then
Requests/Second, Responses/Second, Requests, Errors, Server Requests, Windows, Stable. Rows
follow the sweep's order (perf_analyzer sorts them by throughput).
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from kserve_v2.cli import _common

if TYPE_CHECKING:
    from kserve_v2 import AsyncClient
    from kserve_v2.cli.perf.load import LoadConfig, Step
    from kserve_v2.cli.perf.runner import Measurement, ServerStats, StepResult

__all__ = ["OPTIONS", "add_arguments", "parse_range", "run"]

OPTIONS = ("connection", "output")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from kserve_v2.cli import _tensors

    parser.add_argument("model", metavar="MODEL")
    load = parser.add_argument_group("load")
    mode = load.add_mutually_exclusive_group()
    mode.add_argument(
        "--concurrency",
        "--concurrency-range",
        metavar="SPEC",
        help="requests in flight: 1:32:2 (add 2), 1:32:x2 (double), 1,4,16 or 8 (default 1)",
    )
    mode.add_argument(
        "--request-rate",
        "--request-rate-range",
        metavar="SPEC",
        help="requests per second, same forms: 100:500:100",
    )
    load.add_argument(
        "--distribution",
        choices=("constant", "poisson"),
        default="constant",
        help="request-rate mode: gaps between requests (default constant)",
    )
    load.add_argument(
        "--workers",
        type=int,
        default=1,
        metavar="N",
        help="processes generating the load (default 1); their histograms merge exactly",
    )
    load.add_argument(
        "--max-inflight",
        type=int,
        default=1024,
        metavar="N",
        help="request-rate mode: most requests in flight per process (default 1024)",
    )
    data = parser.add_argument_group("requests")
    _tensors.add_input_arguments(data)
    data.add_argument(
        "-o",
        "--output",
        action="append",
        default=[],
        metavar="NAME[:N]",
        help="ask for this output",
    )
    data.add_argument(
        "-p", "--param", action="append", default=[], metavar="KEY=VALUE", help="a parameter"
    )
    data.add_argument("--model-version", default="", metavar="V")
    data.add_argument(
        "--input-tensor-format",
        choices=("binary", "json"),
        default="binary",
        help="HTTP: tensors in binary form (default) or JSON",
    )
    data.add_argument(
        "--shared-memory",
        choices=("none", "system"),
        default="none",
        help="inputs and outputs through system shared memory (server on this machine)",
    )
    data.add_argument(
        "--output-shared-memory-size",
        type=int,
        default=0,
        metavar="BYTES",
        help="bytes reserved per output in shared memory (default: the size of a probe's)",
    )
    data.add_argument(
        "--streaming",
        action="store_true",
        help="gRPC stream (ModelStreamInfer); decoupled models need it (default for them)",
    )
    data.add_argument(
        "--sequence-length",
        type=int,
        default=None,
        metavar="N",
        help="requests per sequence (sequence models; default 20 when the model's "
        "configuration has a sequence batcher)",
    )
    data.add_argument(
        "--sequence-id-range",
        default="1",
        metavar="START[:END]",
        help="correlation ids to use (default from 1)",
    )
    data.add_argument(
        "--num-of-sequences",
        type=int,
        default=4,
        metavar="N",
        help="request-rate mode: sequences in progress at once (default 4)",
    )
    measure = parser.add_argument_group("measurement")
    measure.add_argument(
        "--measurement-mode",
        choices=("time_windows", "count_windows"),
        default="time_windows",
    )
    measure.add_argument(
        "--measurement-interval",
        type=float,
        default=5000.0,
        metavar="MS",
        help="length of a time window in milliseconds (default 5000)",
    )
    measure.add_argument(
        "--measurement-request-count",
        type=int,
        default=50,
        metavar="N",
        help="requests of a count window (default 50)",
    )
    measure.add_argument(
        "-s",
        "--stability",
        "--stability-percentage",
        type=float,
        default=10.0,
        metavar="PCT",
        help="the last three windows must agree within PCT percent (default 10)",
    )
    measure.add_argument(
        "--max-trials",
        type=int,
        default=10,
        metavar="N",
        help="most windows per step (default 10)",
    )
    measure.add_argument(
        "--percentile",
        type=int,
        metavar="P",
        help="stabilise on this latency percentile (default: the average)",
    )
    out = parser.add_argument_group("results")
    out.add_argument("-f", "--csv", metavar="FILE", help="write the sweep as CSV")
    out.add_argument("--export-json", metavar="FILE", help="write the results as JSON")
    out.add_argument(
        "--plot", metavar="FILE.png", help="throughput vs latency chart (needs matplotlib)"
    )
    out.add_argument(
        "--histogram",
        choices=("last", "all", "none"),
        default="last",
        help="terminal latency histogram of the last step (default), of every step, or none",
    )
    out.add_argument("-q", "--quiet", action="store_true", help="no progress lines")


def parse_range(spec: str, what: str, integer: bool) -> list[float]:
    """``START:END:STEP``, ``START:END:xFACTOR``, ``a,b,c`` or ``N``."""

    def number(text: str) -> float:
        try:
            value = int(text) if integer else float(text)
        except ValueError:
            raise _common.CLIError(f"{what}: {text!r} is not a number") from None
        if value <= 0:
            raise _common.CLIError(f"{what}: values must be positive, got {text}")
        return value

    if "," in spec:
        return [number(p) for p in spec.split(",") if p.strip()]
    parts = spec.split(":")
    if len(parts) == 1:
        return [number(parts[0])]
    if len(parts) not in (2, 3):
        raise _common.CLIError(f"{what} wants START:END[:STEP], not {spec!r}")
    start, end = number(parts[0]), number(parts[1])
    step_text = parts[2] if len(parts) == 3 else "1"
    if end < start:
        raise _common.CLIError(f"{what}: END {parts[1]} is below START {parts[0]}")
    values: list[float] = []
    value = start
    if step_text.lower().startswith("x"):
        factor = float(step_text[1:])
        if factor <= 1:
            raise _common.CLIError(f"{what}: the factor must be above 1")
        while value <= end * (1 + 1e-9):
            values.append(value)
            value = value * factor
            value = round(value) if integer else value
    else:
        step = number(step_text)
        while value <= end * (1 + 1e-9):
            values.append(value)
            value = value + step
    if values and values[-1] != end and len(values) < 10_000:
        values.append(end)  # the END given is always measured
    if len(values) > 1000:
        raise _common.CLIError(f"{what}: {len(values)} steps is too many")
    return values


def _prepare(args: argparse.Namespace) -> tuple[LoadConfig, int, list[Step], dict[str, Any]]:
    """The load configuration (inputs from the model's metadata), batch size, steps, notes."""
    from kserve_v2.cli import _streams, _tensors
    from kserve_v2.cli.infer import prepare_inputs
    from kserve_v2.cli.perf.load import LoadConfig, Step
    from kserve_v2.errors import KServeError

    notes: dict[str, Any] = {}
    args.no_metadata = False
    with _common.client(args, hook=None) as client:
        inputs, _ = prepare_inputs(args, client, args.model)
        try:
            config = client.model_config(args.model, args.model_version)
        except KServeError:
            config = {}
        decoupled = bool(config.get("model_transaction_policy", {}).get("decoupled"))
        grpc = client.protocol == "grpc"
        # Asked only where a stream will run (one more request otherwise).
        flags_final = (
            grpc and (args.streaming or decoupled) and _streams.flags_final_responses(client)
        )
    max_batch = int(config.get("max_batch_size", 0) or 0)
    batch = inputs[0].shape[0] if max_batch > 0 and inputs and inputs[0].shape else 1
    streaming = args.streaming
    if decoupled and not streaming:
        if not grpc:
            raise _common.CLIError(
                f"{args.model} is decoupled: it answers over a gRPC stream only",
                hint="use --url grpc://host:8001 (streaming is then the default)",
            )
        streaming = True
        notes["streaming"] = "the model is decoupled: requests go over a gRPC stream"
    if streaming and not grpc:
        raise _common.CLIError("--streaming needs a grpc:// URL")
    if streaming and not flags_final:
        # A streamed request is timed to its final response: without one it never ends.
        raise _common.CLIError(
            "--streaming needs a server that marks each request's final response on a "
            "stream (Triton's ModelStreamInfer); this one does not list Triton's "
            "'parameters' extension",
        )
    sequence_length = args.sequence_length
    if sequence_length is None:
        sequence_length = 20 if "sequence_batching" in config else 0
    if sequence_length < 0:
        raise _common.CLIError("--sequence-length must be positive")
    first, _, last = args.sequence_id_range.partition(":")
    try:
        id_start, id_end = int(first), int(last) if last else 0
    except ValueError:
        raise _common.CLIError("--sequence-id-range wants START[:END]") from None
    if args.workers < 1:
        raise _common.CLIError("--workers must be at least 1")
    client_kwargs = _common.client_options(args)
    load = LoadConfig(
        url=args.url,
        model=args.model,
        version=args.model_version,
        inputs=[(t.name, t.datatype.value, t.data) for t in inputs],
        outputs=[(o.name, o.class_count) for o in _tensors.parse_outputs(args.output)],
        client_kwargs=client_kwargs,
        binary=args.input_tensor_format == "binary",
        parameters=_common.parse_key_values(args.param, "--param"),
        shared_memory=args.shared_memory,
        output_shm_size=args.output_shared_memory_size,
        streaming=streaming,
        sequence_length=sequence_length,
        sequence_id_start=id_start,
        sequence_id_end=id_end,
        num_sequences=args.num_of_sequences,
        max_inflight=args.max_inflight,
        timeout=args.timeout,
    )
    if args.request_rate:
        rates = parse_range(args.request_rate, "--request-rate", integer=False)
        steps = [Step(rate=r, distribution=args.distribution, seed=args.seed) for r in rates]
    else:
        levels = parse_range(args.concurrency or "1", "--concurrency", integer=True)
        steps = [Step(concurrency=int(c)) for c in levels]
    return load, batch, steps, notes


async def _settled_stats(
    client: AsyncClient, args: argparse.Namespace, before: ServerStats, sent: int
) -> ServerStats:
    """The model's statistics once they count the ``sent`` requests since ``before``, read
    again for at most a second: the server may count a request only after its response went
    out (Triton does), so the last ones can be missing for a moment."""
    import asyncio
    import time

    from kserve_v2.cli.perf.runner import read_server_stats

    deadline = time.monotonic() + 1.0
    while True:
        after = await read_server_stats(client, args.model, args.model_version)
        delta = after.minus(before)
        counted = delta.counts.get("success", 0) + delta.counts.get("fail", 0)
        if not after.available or counted >= sent or time.monotonic() >= deadline:
            return after
        await asyncio.sleep(0.02)


async def _measure(
    args: argparse.Namespace,
    load: LoadConfig,
    batch: int,
    steps: list[Step],
    measurement: Measurement,
) -> tuple[list[StepResult], dict[str, int]]:
    import sys

    from kserve_v2.cli.perf.report import ProgressLine
    from kserve_v2.cli.perf.runner import Pool, measure_step, read_server_stats
    from kserve_v2.cli.perf.worker import LocalPool, ProcessPool

    style = _common.Style(_common.wants_color(args, sys.stderr))
    progress = ProgressLine(sys.stderr, quiet=args.quiet, style=style)
    stats_client = _common.async_client(args, hook=None)
    pool: Pool = ProcessPool(load, args.workers) if args.workers > 1 else LocalPool(load)
    results: list[StepResult] = []
    try:
        before = await read_server_stats(stats_client, args.model, args.model_version)
        try:
            await pool.setup()
            for step in steps:
                result = await measure_step(
                    pool,
                    step,
                    measurement,
                    stats_client,
                    args.model,
                    args.model_version,
                    batch,
                    progress,
                )
                progress.step_done(result)
                results.append(result)
        finally:
            await pool.close()
        sent = results[-1].totals.sent_total if results else 0
        after = await _settled_stats(stats_client, args, before, sent)
    finally:
        await stats_client.aclose()
    delta = after.minus(before)
    server = {
        "success": delta.counts.get("success", 0),
        "fail": delta.counts.get("fail", 0),
        "available": int(delta.available),
    }
    return results, server


def _check_measurement(args: argparse.Namespace) -> None:
    """Refuse measurement options out of range, and output files that cannot be written,
    before the server is asked anything."""
    if not args.measurement_interval > 0:  # NaN fails too
        raise _common.CLIError(
            f"--measurement-interval must be positive, got {args.measurement_interval:g}"
        )
    if args.measurement_request_count < 1:
        raise _common.CLIError(
            f"--measurement-request-count must be at least 1, got {args.measurement_request_count}"
        )
    if not 0 <= args.stability < float("inf"):
        raise _common.CLIError(f"--stability must be a percentage >= 0, got {args.stability:g}")
    if args.max_trials < 1:
        raise _common.CLIError(f"--max-trials must be at least 1, got {args.max_trials}")
    if args.percentile is not None and not 1 <= args.percentile <= 100:
        raise _common.CLIError(f"--percentile must be 1 to 100, got {args.percentile}")
    if args.output_shared_memory_size < 0:
        raise _common.CLIError(
            f"--output-shared-memory-size must be >= 0, got {args.output_shared_memory_size}"
        )
    # Before the sweep: its results are not lost to an output file that cannot be written.
    for path, option in (
        (args.csv, "--csv"),
        (args.export_json, "--export-json"),
        (args.plot, "--plot"),
    ):
        if path:
            _common.check_output_file(path, option)


def run(args: argparse.Namespace) -> int:
    import asyncio
    import json
    import sys

    from kserve_v2.cli.perf.report import histogram_text, sweep_table, write_csv, write_png
    from kserve_v2.cli.perf.runner import AllRequestsFailed, Measurement

    if args.dump:
        raise _common.CLIError("--dump does not go with perf (use it with infer)")
    _check_measurement(args)
    load, batch, steps, notes = _prepare(args)
    measurement = Measurement(
        mode="count" if args.measurement_mode == "count_windows" else "time",
        interval=args.measurement_interval / 1000,
        count=args.measurement_request_count,
        stability=args.stability,
        max_trials=args.max_trials,
        percentile=args.percentile,
    )
    for note in notes.values():
        sys.stderr.write(f"note: {note}\n")
    try:
        results, server = asyncio.run(_measure(args, load, batch, steps, measurement))
    except AllRequestsFailed as exc:
        raise _common.CLIError(str(exc), status=1) from None
    totals = results[-1].totals if results else None
    document: dict[str, Any] = {
        "model": args.model,
        "url": args.url,
        "mode": "request_rate" if args.request_rate else "concurrency",
        "batch_size": batch,
        "workers": args.workers,
        "streaming": load.streaming,
        "shared_memory": load.shared_memory,
        "sequence_length": load.sequence_length,
        "measurement": {
            "mode": args.measurement_mode,
            "interval_ms": args.measurement_interval,
            "request_count": args.measurement_request_count,
            "stability_percent": args.stability,
            "max_trials": args.max_trials,
            "percentile": args.percentile,
        },
        "steps": [{**r.row(), "histogram": r.histogram.to_dict()} for r in results],
        "totals": {
            "sent": totals.sent_total if totals else 0,
            "completed": totals.completed_total if totals else 0,
            "errors": totals.errors_total if totals else 0,
        },
        "server_counted": server,
    }
    if args.csv:
        with _common.writing(args.csv, "--csv"):
            write_csv(results, args.csv)
    if args.export_json:
        with _common.writing(args.export_json, "--export-json"), open(args.export_json, "w") as f:
            json.dump(document, f, indent=2)
    if args.plot:
        try:
            with _common.writing(args.plot, "--plot"):
                write_png(results, args.plot, f"{args.model} ({args.url})")
        except ImportError:
            sys.stderr.write(
                "note: --plot needs matplotlib: pip install 'kserve-v2[cli]'; no PNG written\n"
            )
    style = _common.Style(_common.wants_color(args, sys.stdout))

    def human() -> str:
        lines = [sweep_table(results, style)]
        shown = (
            results if args.histogram == "all" else results[-1:] if args.histogram == "last" else []
        )
        bar = "█" if (sys.stdout.encoding or "").lower().replace("-", "") == "utf8" else "#"
        for r in shown:
            label = (
                f"rate {r.step.rate:g}/s" if r.step.rate else f"concurrency {r.step.concurrency}"
            )
            lines += [
                "",
                style(f"latency histogram, {label} ({r.histogram.count} requests)", "bold"),
            ]
            lines.append(histogram_text(r.histogram, bar=bar))
        t = document["totals"]
        lines.append("")
        lines.append(
            f"{t['sent']} requests sent, {t['completed']} completed, {t['errors']} errors; "
            + (
                f"the server counted {server['success']} successes, {server['fail']} failures"
                if server["available"]
                else "the server has no statistics extension"
            )
        )
        for path, what in ((args.csv, "CSV"), (args.export_json, "JSON"), (args.plot, "PNG")):
            if path:
                lines.append(f"{what}: {path}")
        return "\n".join(lines)

    _common.emit(args, document, human)
    unstable = [r for r in results if not r.stable]
    if unstable and not args.quiet:
        sys.stderr.write(
            f"note: {len(unstable)} step(s) did not stabilise within {args.max_trials} windows "
            f"(--stability {args.stability:g}%); their numbers are of the last windows\n"
        )
    return 0
