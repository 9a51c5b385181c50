"""What ``perf`` prints and writes: the live progress line, the sweep table, the terminal
latency histogram, the CSV (perf_analyzer's column names where a column means the same), the
JSON document and the throughput-vs-latency PNG (with matplotlib)."""

from __future__ import annotations

import csv
import math
from collections.abc import Sequence
from typing import IO, Any, Final

from kserve_v2.cli._common import format_table
from kserve_v2.cli.perf.histogram import LatencyHistogram
from kserve_v2.cli.perf.load import Step
from kserve_v2.cli.perf.runner import StepResult, Window
from kserve_v2.cli.style import Style

__all__ = ["CSV_COLUMNS", "ProgressLine", "histogram_text", "sweep_table", "write_csv", "write_png"]

#: CSV columns: perf_analyzer's first (same names, same units: microseconds), then ours.
CSV_COLUMNS: Final = (
    ("Inferences/Second", "inferences_per_s"),
    ("Client Send", "client_send_us"),
    ("Network+Server Send/Recv", "network_server_us"),
    ("Server Queue", "server_queue_us"),
    ("Server Compute Input", "server_compute_input_us"),
    ("Server Compute Infer", "server_compute_infer_us"),
    ("Server Compute Output", "server_compute_output_us"),
    ("Client Recv", "client_recv_us"),
    ("p50 latency", "p50_us"),
    ("p90 latency", "p90_us"),
    ("p95 latency", "p95_us"),
    ("p99 latency", "p99_us"),
    ("Avg latency", "avg_us"),
    # not perf_analyzer's:
    ("Requests/Second", "requests_per_s"),
    ("Responses/Second", "responses_per_s"),
    ("Requests", "requests"),
    ("Errors", "errors"),
    ("Server Requests", "server_requests"),
    ("Windows", "windows"),
    ("Stable", "stable"),
)


def _step_label(step: Step) -> str:
    if step.rate:
        return f"rate {step.rate:g}/s" + (" poisson" if step.distribution == "poisson" else "")
    return f"concurrency {step.concurrency}"


class ProgressLine:
    """One line per window: rewritten in place on a terminal, else printed (unless quiet)."""

    def __init__(self, stream: IO[str], *, quiet: bool = False, style: Style | None = None):
        self.stream = stream
        self.quiet = quiet
        self.tty = bool(getattr(stream, "isatty", lambda: False)())
        self.style = style or Style(False)

    def __call__(self, step: Step, trial: int, window: Window, stable: bool) -> None:
        if self.quiet:
            return
        h = window.stats.histogram
        text = (
            f"{_step_label(step)}: window {trial + 1}: {window.throughput:,.1f} req/s, "
            f"avg {h.mean() / 1e6:.2f} ms, p99 {h.percentile(99) / 1e6:.2f} ms"
            + (f", {window.stats.errors} errors" if window.stats.errors else "")
            + (" (stable)" if stable else "")
        )
        if self.tty:
            self.stream.write("\r\x1b[2K" + self.style(text, "dim"))
            if stable:
                self.stream.write("\n")
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def step_done(self, result: StepResult) -> None:
        if self.tty and not self.quiet and not result.stable:
            self.stream.write("\n")


def _ms(us: float) -> str:
    return f"{us / 1000:.2f}"


def sweep_table(results: Sequence[StepResult], style: Style | None = None) -> str:
    """The sweep for people: one row per step (latencies in ms, server times in µs)."""
    rate_mode = any(r.step.rate for r in results)
    rows = []
    for r in results:
        row = r.row()
        rows.append(
            (
                f"{r.step.rate:g}" if rate_mode else r.step.concurrency,
                f"{row['inferences_per_s']:,.1f}",
                _ms(row["p50_us"]),
                _ms(row["p90_us"]),
                _ms(row["p95_us"]),
                _ms(row["p99_us"]),
                _ms(row["avg_us"]),
                f"{row['client_send_us']:.0f}/{row['client_recv_us']:.0f}"
                if row["client_timed"]
                else "-",
                # Without the server's statistics there is nothing to show, not zeros.
                f"{row['server_queue_us']:.0f}" if row["server_statistics"] else "-",
                f"{row['server_compute_input_us']:.0f}/{row['server_compute_infer_us']:.0f}/"
                f"{row['server_compute_output_us']:.0f}"
                if row["server_statistics"]
                else "-",
                row["errors"],
                "yes" if r.stable else "no",
            )
        )
    headers = (
        "rate/s" if rate_mode else "concurrency",
        "infer/s",
        "p50 ms",
        "p90 ms",
        "p95 ms",
        "p99 ms",
        "avg ms",
        "send/recv µs",
        "queue µs",
        "in/infer/out µs",
        "errors",
        "stable",
    )
    return format_table(headers, rows, style=style, align=">" * len(headers))


def histogram_text(h: LatencyHistogram, *, bins: int = 12, width: int = 40, bar: str = "#") -> str:
    """A horizontal bar chart of ``h`` over ``bins`` log-spaced latency ranges."""
    if not h.count:
        return "(no requests)"
    low, high = max(h.min, 1), max(h.max, 2)
    if high <= low:
        high = low + 1
    edges = [low * (high / low) ** (i / bins) for i in range(bins + 1)]
    counts = [0] * bins
    for index, n in h.buckets.items():
        lo, hi = LatencyHistogram.bucket_bounds(index)
        middle = min(max(math.sqrt(lo * hi), low), high)
        slot = min(bins - 1, max(0, int(math.log(middle / low) / math.log(high / low) * bins)))
        counts[slot] += n
    peak = max(counts) or 1
    lines = []
    for i, n in enumerate(counts):
        label = f"{edges[i] / 1e6:8.3f} - {edges[i + 1] / 1e6:8.3f} ms"
        length = round(width * n / peak)
        lines.append(f"{label} |{bar * length}{' ' * (width - length)}| {n}")
    return "\n".join(lines)


def write_csv(results: Sequence[StepResult], path: str) -> None:
    """The sweep as CSV, one row per step in sweep order."""
    rate_mode = any(r.step.rate for r in results)
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(
            ["Request Rate" if rate_mode else "Concurrency", *(c for c, _ in CSV_COLUMNS)]
        )
        for r in results:
            row = r.row()
            first = f"{r.step.rate:g}" if rate_mode else r.step.concurrency
            cells: list[Any] = [first]
            for _, key in CSV_COLUMNS:
                value = row[key]
                if isinstance(value, bool):
                    cells.append("yes" if value else "no")
                elif isinstance(value, float):
                    cells.append(f"{value:.1f}" if key.endswith("_per_s") else round(value))
                else:
                    cells.append("" if value is None else value)
            writer.writerow(cells)


def write_png(results: Sequence[StepResult], path: str, title: str) -> None:
    """Throughput (x) against p50/p90/p99 latency (y) across the sweep; needs matplotlib."""
    import importlib

    # Imported by name: matplotlib is an optional extra without type stubs here.
    matplotlib = importlib.import_module("matplotlib")
    matplotlib.use("Agg")
    plt = importlib.import_module("matplotlib.pyplot")

    rows = [r.row() for r in results]
    x = [row["inferences_per_s"] for row in rows]
    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=110)
    for key, label, marker in (
        ("p50_us", "p50", "o"),
        ("p90_us", "p90", "s"),
        ("p99_us", "p99", "^"),
    ):
        ax.plot(x, [row[key] / 1000 for row in rows], marker=marker, label=label)
    for r, row in zip(results, rows, strict=True):
        tag = f"{r.step.rate:g}/s" if r.step.rate else f"c={r.step.concurrency}"
        ax.annotate(
            tag,
            (row["inferences_per_s"], row["p99_us"] / 1000),
            fontsize=7,
            textcoords="offset points",
            xytext=(4, 4),
        )
    ax.set_xlabel("throughput (inferences/s)")
    ax.set_ylabel("latency (ms)")
    ax.set_title(title, fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
