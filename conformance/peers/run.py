"""Run the conformance suite against KServe's Python model server and MLServer.

``bash scripts/conformance_peers.sh`` sets the environments up and runs this module (``python
-m conformance.peers.run`` from the checkout's root). Each server is started on loopback with
the suite's models for it (``conformance/peers/kserve/server.py``,
``conformance/peers/mlserver/``), through the project's launchers
(:class:`kserve_v2.testing.KServeServer`, :class:`kserve_v2.testing.MLServerServer`); the suite
runs over HTTP and gRPC with the server's known deviations
(``kserve_v2/conformance/expected/<server>.json``) and writes ``<server>.json``, ``.md`` and
``.html`` (and the server's log) to the output directory.

The exit status is 0 when every case of every server passed, skipped or failed as a listed
deviation; 1 when a case failed that is not listed, a case broke, a listed deviation
passed (the list must lose it), or a server could not be checked (a URL that did not answer,
or no case ran).

Example::

    python -m conformance.peers.run --server kserve --out /tmp/reports --only 'rest.infer.*'
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from kserve_v2.cli import main as kserve_v2_main
from kserve_v2.testing import KServeServer, MLServerServer, PeerServer

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent


@dataclass(frozen=True)
class Peer:
    """A server the suite runs against: how to start it and its known deviations."""

    name: str
    expected: str
    start: Callable[[Path], PeerServer]


PEERS = {
    "kserve": Peer(
        "kserve",
        "kserve-0.21",
        lambda log: KServeServer(HERE / "kserve" / "server.py", log_file=log),
    ),
    "mlserver": Peer(
        "mlserver",
        "mlserver-1.7",
        lambda log: MLServerServer(HERE / "mlserver", log_file=log),
    ),
}


def _run_one(peer: Peer, out: Path, suite_args: Sequence[str]) -> dict[str, object]:
    log = out / f"{peer.name}.log"
    log.unlink(missing_ok=True)
    reports = [out / f"{peer.name}.{suffix}" for suffix in ("json", "md", "html")]
    started = time.monotonic()
    print(f"== {peer.name}: starting (log {log})", flush=True)
    with peer.start(log) as server:
        env = server.environment
        print(
            f"== {peer.name} {env.version if env else '?'} ready in "
            f"{server.startup_seconds or 0:.1f} s: http {server.http_url}, grpc {server.grpc_url}",
            flush=True,
        )
        argv = ["conformance", "--http", server.http_url, "--grpc", server.grpc_url]
        argv += ["--expected", peer.expected, *suite_args]
        for report in reports:
            argv += ["--report", str(report)]
        kserve_v2_main(argv)
    data = json.loads(reports[0].read_text(encoding="utf-8"))
    summary = data["summary"]
    return {**summary, "seconds": time.monotonic() - started, "suite_seconds": data["duration_s"]}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0] if __doc__ else None,
        epilog="Other arguments go to `kserve-v2 conformance` (e.g. --only PATTERN, -q).",
    )
    parser.add_argument(
        "--server",
        choices=sorted(PEERS),
        action="append",
        help="run against this server only (repeatable; default: all)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=ROOT / "conformance" / "reports",
        help="where the reports and logs go (default: conformance/reports)",
    )
    args, suite_args = parser.parse_known_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    results = {name: _run_one(PEERS[name], args.out, suite_args) for name in args.server or PEERS}
    print("\nserver     passed  failed  deviation  error  skipped  stale  suite s  total s")
    status = 0
    for name, s in results.items():
        stale = s["stale_deviations"]
        assert isinstance(stale, list)
        print(
            f"{name:<10} {s['passed']:>6}  {s['failed']:>6}  {s['deviation']:>9}  "
            f"{s['error']:>5}  {s['skipped']:>7}  {len(stale):>5}  "
            f"{s['suite_seconds']:>7.1f}  {s['seconds']:>7.1f}"
        )
        if s["failed"] or s["error"] or stale:
            status = 1
        unchecked = s.get("unchecked") or []  # a URL that did not answer, or no case ran
        assert isinstance(unchecked, list)
        for line in unchecked:
            print(f"{name}: not checked: {line}")
            status = 1
    print(f"reports: {args.out}")
    return status


if __name__ == "__main__":
    sys.exit(main())
