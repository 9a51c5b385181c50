"""``kserve-v2 perf`` against the live Triton: every request it sends is one the server counts
(statistics deltas), in each mode; histograms merge exactly across windows and processes.

Windows are tiny (100 ms, at most three per step): these tests check counting and plumbing,
not speed. Throughput against the benchmark harness is checked by
``benchmarks/cli_perf_check.py`` (timing has no place in tests).
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

from kserve_v2 import Client
from kserve_v2.cli.perf.report import CSV_COLUMNS
from kserve_v2.testing import TritonServer
from tests.cli.conftest import Runner

TINY = ("--measurement-interval", "100", "--max-trials", "3", "-q", "--json")


def _server_count(triton: TritonServer, model: str) -> int:
    with Client(triton.http_url) as client:
        stats = client.model_statistics(model)["model_stats"]
    inference = stats[0]["inference_stats"]
    return int(inference["success"]["count"]) + int(inference["fail"]["count"])


def _perf(cli: Runner, triton: TritonServer, model: str, *args: str) -> dict[str, Any]:
    """Run perf; check the counting against the server's statistics; the JSON document."""
    before = _server_count(triton, model)
    result = cli("perf", model, *args, *TINY)
    assert result.status == 0, result.err
    after = _server_count(triton, model)
    document: dict[str, Any] = result.json()  # type: ignore[assignment]
    totals = document["totals"]
    assert totals["sent"] > 0
    assert totals["errors"] == 0
    assert totals["completed"] == totals["sent"]
    assert after - before == totals["sent"]  # every request sent, and no more, was counted
    assert document["server_counted"]["success"] == totals["sent"]
    for step in document["steps"]:
        assert step["requests"] > 0
        assert step["errors"] == 0
        assert step["histogram"]["count"] == step["requests"]
        assert step["p50_us"] <= step["p90_us"] <= step["p95_us"] <= step["p99_us"]
        assert step["min_us"] <= step["avg_us"] <= step["max_us"]
        assert 1 <= step["measured_windows"] <= step["windows"] <= 3
    return document


def test_concurrency_sweep_counts_and_csv(
    cli: Runner, server_url: str, triton: TritonServer, tmp_path: Path
) -> None:
    csv_path = tmp_path / "perf.csv"
    document = _perf(
        cli, triton, "simple", "--url", server_url, "--concurrency", "1:2", "--csv", str(csv_path)
    )
    assert [s["concurrency"] for s in document["steps"]] == [1, 2]
    assert document["batch_size"] == 1
    for step in document["steps"]:
        assert step["inferences_per_s"] > 0
        assert step["server_compute_infer_us"] > 0  # from the statistics extension
        assert step["client_send_us"] > 0
        assert step["client_recv_us"] > 0
    with csv_path.open() as f:
        rows = list(csv.reader(f))
    assert rows[0][:14] == [
        "Concurrency", "Inferences/Second", "Client Send", "Network+Server Send/Recv",
        "Server Queue", "Server Compute Input", "Server Compute Infer", "Server Compute Output",
        "Client Recv", "p50 latency", "p90 latency", "p95 latency", "p99 latency", "Avg latency",
    ]  # fmt: skip
    assert rows[0][1:] == [name for name, _ in CSV_COLUMNS]
    assert [r[0] for r in rows[1:]] == ["1", "2"]
    requests_column = rows[0].index("Requests")
    assert [int(r[requests_column]) for r in rows[1:]] == [s["requests"] for s in document["steps"]]


def test_human_output(cli: Runner, triton: TritonServer) -> None:
    result = cli(
        "perf", "simple", "--url", triton.http_url, "--concurrency", "1",
        "--measurement-interval", "100", "--max-trials", "3",
    )  # fmt: skip
    assert result.status == 0, result.err
    lines = result.out.splitlines()
    assert lines[0].split()[:3] == ["concurrency", "infer/s", "p50"]
    assert lines[1].split()[0] == "1"
    assert any(line.startswith("latency histogram, concurrency 1 (") for line in lines)
    bars = [line for line in lines if " ms |" in line]
    assert len(bars) == 12
    counted = sum(int(line.rsplit("| ", 1)[1]) for line in bars)
    assert f"({counted} requests)" in result.out  # the histogram holds every measured request
    assert "requests sent" in lines[-1]
    assert "the server counted" in lines[-1]
    assert "concurrency 1: window 1:" in result.err  # progress lines


def test_request_rate_poisson(cli: Runner, server_url: str, triton: TritonServer) -> None:
    document = _perf(
        cli, triton, "simple", "--url", server_url, "--request-rate", "100,200",
        "--distribution", "poisson",
    )  # fmt: skip
    assert document["mode"] == "request_rate"
    assert [s["request_rate"] for s in document["steps"]] == [100.0, 200.0]


def test_workers_merge_exactly(cli: Runner, triton: TritonServer) -> None:
    document = _perf(
        cli, triton, "identity_int32", "--url", f"grpc://{triton.grpc_url}", "--concurrency",
        "3", "--workers", "2", "--measurement-mode", "count_windows",
        "--measurement-request-count", "30",
    )  # fmt: skip
    (step,) = document["steps"]
    assert document["workers"] == 2
    assert step["requests"] >= 30 * step["measured_windows"]
    buckets = step["histogram"]["buckets"]
    assert sum(buckets.values()) == step["requests"]


def test_sequences(cli: Runner, triton: TritonServer) -> None:
    document = _perf(
        cli, triton, "sequence_accumulate", "--url", triton.http_url, "--concurrency", "2",
        "--sequence-length", "3", "--sequence-id-range", "5000",
    )  # fmt: skip
    assert document["sequence_length"] == 3


def test_streaming_decoupled_model(cli: Runner, triton: TritonServer) -> None:
    document = _perf(
        cli, triton, "repeat_decoupled", "-i", "REPEAT=[2]", "-i", "IN=[1,2,3]",
        "--url", f"grpc://{triton.grpc_url}", "--concurrency", "2",
    )  # fmt: skip
    assert document["streaming"] is True
    (step,) = document["steps"]
    assert step["responses"] == 2 * step["requests"]


def test_decoupled_model_over_http_is_refused(cli: Runner, triton: TritonServer) -> None:
    result = cli("perf", "repeat_decoupled", "--url", triton.http_url, *TINY)
    assert result.status == 2
    assert "repeat_decoupled is decoupled" in result.err


def test_shared_memory_and_json_tensors(cli: Runner, server_url: str, triton: TritonServer) -> None:
    document = _perf(
        cli, triton, "identity_fp32", "--shape", "INPUT0=1,256", "--url", server_url,
        "--concurrency", "2", "--shared-memory", "system",
    )  # fmt: skip
    assert document["shared_memory"] == "system"
    with Client(triton.http_url) as client:
        left = [r["name"] for r in client.system_shared_memory_status()]
    assert not [name for name in left if name.startswith("kv2perf_")]
    if server_url.startswith("http"):
        _perf(cli, triton, "identity_fp32", "--url", server_url, "--input-tensor-format", "json")


def test_plot(cli: Runner, triton: TritonServer, tmp_path: Path) -> None:
    png = tmp_path / "perf.png"
    result = cli("perf", "simple", "--url", triton.http_url, "--plot", str(png), *TINY)
    assert result.status == 0, result.err
    import importlib.util

    if importlib.util.find_spec("matplotlib") is None:
        assert "--plot needs matplotlib: pip install 'kserve-v2[cli]'" in result.err
        assert not png.exists()
    else:
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_bad_ranges(cli: Runner, triton: TritonServer) -> None:
    for spec, message in (
        ("4:1", "END 1 is below START 4"),
        ("0", "values must be positive"),
        ("1:8:x1", "the factor must be above 1"),
    ):
        result = cli("perf", "simple", "--url", triton.http_url, "--concurrency", spec)
        assert result.status == 2
        assert message in result.err
    both = cli("perf", "simple", "--concurrency", "1", "--request-rate", "5")
    assert both.status == 2
    assert "not allowed with argument" in both.err
