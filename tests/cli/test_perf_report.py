"""perf's sweep table (kserve_v2/cli/perf/report.py), from step results made here."""

from __future__ import annotations

from kserve_v2.cli.perf.load import Step, WindowStats
from kserve_v2.cli.perf.report import sweep_table
from kserve_v2.cli.perf.runner import ServerStats, StepResult, Window


def _result(server: ServerStats) -> StepResult:
    stats = WindowStats(completed=10, timed=10, send_ns=10_000, recv_ns=20_000)
    for _ in range(10):
        stats.histogram.record(2_000_000)
    window = Window(1.0, stats, server)
    return StepResult(Step(concurrency=1), [window], True, 1, stats)


def _last_row(table: str) -> list[str]:
    return table.splitlines()[-1].split()


def test_server_times_show_when_the_server_gave_statistics() -> None:
    server = ServerStats(
        counts=dict.fromkeys(("queue", "compute_input", "compute_infer", "compute_output"), 10),
        ns={"queue": 50_000, "compute_input": 10_000, "compute_infer": 900_000,
            "compute_output": 20_000},
    )  # fmt: skip
    row = _last_row(sweep_table([_result(server)]))
    assert row[-4:-2] == ["5", "1/90/2"]


def test_no_server_statistics_show_as_dashes_not_zeros() -> None:
    # A server without the statistics extension (KServe): nothing was measured.
    row = _last_row(sweep_table([_result(ServerStats(available=False))]))
    assert row[-4:-2] == ["-", "-"]
    assert row[-5] == "1/2"  # the client's own send/recv times are still there
