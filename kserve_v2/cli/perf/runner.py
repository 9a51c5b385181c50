"""The measurement: for each step of the sweep, windows until the last three agree, with the
server's own statistics over each window.

A window is a time window (``interval`` seconds) or a count window (``count`` requests, all
processes together). After each window the load's histograms are merged (exactly) and the
server's statistics (statistics extension) are read again, so each window has the server's
queue and compute times of the requests it finished. A step is stable when throughput and
latency (average, or the chosen percentile) of each of the last three windows are within
``stability`` percent of the three windows' mean; its result merges those three windows.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from kserve_v2.cli.perf.histogram import LatencyHistogram
from kserve_v2.cli.perf.load import Step, WindowStats

if TYPE_CHECKING:
    from kserve_v2 import AsyncClient

__all__ = [
    "AllRequestsFailed",
    "Measurement",
    "Pool",
    "ServerStats",
    "StepResult",
    "Window",
    "measure_step",
]

_PHASES = ("success", "fail", "queue", "compute_input", "compute_infer", "compute_output")


class Pool(Protocol):
    async def setup(self) -> None: ...
    async def start(self, step: Step) -> None: ...
    async def peek(self) -> int: ...
    async def snapshot(self) -> list[WindowStats]: ...
    async def stop(self) -> list[WindowStats]: ...
    async def close(self) -> None: ...


@dataclass
class Measurement:
    """How to measure each step."""

    mode: str = "time"  # "time" or "count"
    interval: float = 5.0  # seconds, time windows
    count: int = 50  # requests, count windows
    stability: float = 10.0  # percent
    max_trials: int = 10
    percentile: int | None = None  # stabilise on this percentile, else the average latency


@dataclass
class ServerStats:
    """Counts and nanoseconds of a model's statistics (summed over its versions)."""

    counts: dict[str, int] = field(default_factory=dict)
    ns: dict[str, int] = field(default_factory=dict)
    available: bool = True

    def minus(self, other: ServerStats) -> ServerStats:
        return ServerStats(
            {k: self.counts.get(k, 0) - other.counts.get(k, 0) for k in _PHASES},
            {k: self.ns.get(k, 0) - other.ns.get(k, 0) for k in _PHASES},
            self.available and other.available,
        )

    def plus(self, other: ServerStats) -> ServerStats:
        return ServerStats(
            {k: self.counts.get(k, 0) + other.counts.get(k, 0) for k in _PHASES},
            {k: self.ns.get(k, 0) + other.ns.get(k, 0) for k in _PHASES},
            self.available and other.available,
        )

    def avg_us(self, phase: str) -> float:
        count = self.counts.get(phase, 0)
        return self.ns.get(phase, 0) / count / 1000 if count else 0.0


async def read_server_stats(client: AsyncClient, model: str, version: str) -> ServerStats:
    """The model's statistics now (``available=False`` when the server has none)."""
    from kserve_v2.errors import ServerError

    try:
        data = await client.model_statistics(model, version)
    except ServerError:
        return ServerStats(available=False)
    stats = ServerStats()
    for entry in data.get("model_stats", []):
        inference = entry.get("inference_stats", {})
        for phase in _PHASES:
            item = inference.get(phase, {})
            stats.counts[phase] = stats.counts.get(phase, 0) + int(item.get("count", 0))
            stats.ns[phase] = stats.ns.get(phase, 0) + int(item.get("ns", 0))
    return stats


@dataclass
class Window:
    duration: float
    stats: WindowStats
    server: ServerStats

    @property
    def throughput(self) -> float:
        return self.stats.completed / self.duration if self.duration > 0 else 0.0

    def latency(self, percentile: int | None) -> float:
        h = self.stats.histogram
        return h.percentile(percentile) if percentile else h.mean()


@dataclass
class StepResult:
    """The result of one step: the merge of its last (up to) three windows."""

    step: Step
    windows: list[Window]
    stable: bool
    batch: int
    totals: WindowStats

    @property
    def measured(self) -> list[Window]:
        return self.windows[-3:]

    @property
    def histogram(self) -> LatencyHistogram:
        return LatencyHistogram.merged(w.stats.histogram for w in self.measured)

    @property
    def stats(self) -> WindowStats:
        merged = WindowStats()
        for w in self.measured:
            merged.merge(w.stats)
        return merged

    @property
    def server(self) -> ServerStats:
        total = ServerStats()
        for w in self.measured:
            total = total.plus(w.server)
        return total

    @property
    def duration(self) -> float:
        return sum(w.duration for w in self.measured)

    def row(self) -> dict[str, Any]:
        """The step's numbers; latencies and times in microseconds."""
        stats, h, server = self.stats, self.histogram, self.server
        duration = self.duration
        throughput = stats.completed / duration if duration > 0 else 0.0
        send = stats.send_ns / stats.timed / 1000 if stats.timed else 0.0
        recv = stats.recv_ns / stats.timed / 1000 if stats.timed else 0.0
        phases = {p: server.avg_us(p) for p in _PHASES[2:]}
        avg = h.mean() / 1000
        network = max(0.0, avg - send - recv - sum(phases.values())) if server.available else 0.0
        return {
            "concurrency": self.step.concurrency,
            "request_rate": self.step.rate,
            "requests_per_s": throughput,
            "inferences_per_s": throughput * self.batch,
            "responses_per_s": stats.responses / duration if duration > 0 else 0.0,
            "client_send_us": send,
            "network_server_us": network,
            "server_queue_us": phases["queue"],
            "server_compute_input_us": phases["compute_input"],
            "server_compute_infer_us": phases["compute_infer"],
            "server_compute_output_us": phases["compute_output"],
            "client_recv_us": recv,
            "client_timed": stats.timed,  # requests with send/receive times (not streamed)
            "server_statistics": server.available,  # the server_* times were measured
            "p50_us": h.percentile(50) / 1000,
            "p90_us": h.percentile(90) / 1000,
            "p95_us": h.percentile(95) / 1000,
            "p99_us": h.percentile(99) / 1000,
            "avg_us": avg,
            "min_us": h.min / 1000,
            "max_us": h.max / 1000,
            "requests": stats.completed,
            "errors": stats.errors,
            "responses": stats.responses,
            "late": stats.late,
            "server_requests": server.counts.get("success", 0) if server.available else None,
            "windows": len(self.windows),
            "measured_windows": len(self.measured),
            "duration_s": duration,
            "stable": self.stable,
        }


def is_stable(windows: Sequence[Window], stability: float, percentile: int | None) -> bool:
    """Whether the last three windows' throughput and latency are each within ``stability``
    percent of their mean."""
    if len(windows) < 3:
        return False
    last = windows[-3:]
    for values in ([w.throughput for w in last], [w.latency(percentile) for w in last]):
        mean = sum(values) / 3
        if mean <= 0 or any(abs(v - mean) > mean * stability / 100 for v in values):
            return False
    return True


Progress = Callable[[Step, int, Window, bool], None]


async def _wait_window(pool: Pool, measurement: Measurement) -> None:
    if measurement.mode == "time":
        await asyncio.sleep(measurement.interval)
        return
    # Count windows: until the processes together finished `count` requests. A window that
    # makes no progress for a long time is ended anyway (a stuck server must not hang us).
    deadline = time.monotonic() + max(60.0, measurement.interval * 10)
    while await pool.peek() < measurement.count and time.monotonic() < deadline:
        await asyncio.sleep(0.005)


async def measure_step(
    pool: Pool,
    step: Step,
    measurement: Measurement,
    stats_client: AsyncClient,
    model: str,
    version: str,
    batch: int,
    progress: Progress | None = None,
) -> StepResult:
    """Run ``step`` until stable or ``max_trials`` windows; then stop and drain it."""
    await pool.start(step)
    windows: list[Window] = []
    stable = False
    try:
        before = await read_server_stats(stats_client, model, version)
        await pool.snapshot()  # the window starts now (after the stats read)
        last = time.perf_counter()
        for trial in range(measurement.max_trials):
            await _wait_window(pool, measurement)
            snaps = await pool.snapshot()
            now = time.perf_counter()
            after = await read_server_stats(stats_client, model, version)
            merged = WindowStats()
            for snap in snaps:
                merged.merge(snap)
            window = Window(now - last, merged, after.minus(before))
            windows.append(window)
            before, last = after, time.perf_counter()
            await pool.snapshot()  # time spent reading the statistics is not measured
            stable = is_stable(windows, measurement.stability, measurement.percentile)
            if progress is not None:
                progress(step, trial, window, stable)
            if merged.completed == 0 and merged.errors:
                raise AllRequestsFailed(merged.first_error)
            if stable:
                break
    finally:
        final = await pool.stop()
    totals = WindowStats()
    for snap in final:
        totals.merge(snap)
    return StepResult(step, windows, stable, batch, totals)


class AllRequestsFailed(Exception):
    """Every request of a window failed: measuring on makes no sense."""

    def __init__(self, first_error: str) -> None:
        super().__init__(f"every request of the window failed; the first: {first_error}")
