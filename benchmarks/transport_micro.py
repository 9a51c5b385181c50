"""Micro-benchmark: client CPU time per small HTTP request, per transport.

Sequential small POSTs (a ~200-byte JSON body, a ~150-byte JSON answer) on one keep-alive
connection to a minimal raw-socket server running in a *separate process*, so that
``time.process_time()`` in this process is the client's CPU alone (user + system).

    .venv/bin/python benchmarks/transport_micro.py [--requests 10000] [--rounds 3]
        [--transports stdlib,aio,httpx,ahttpx,geventhttpclient]

Transports: ``stdlib`` (HTTPTransport), ``aio`` (AsyncHTTPTransport), ``httpx``
(HTTPXTransport), ``ahttpx`` (AsyncHTTPXTransport), and ``geventhttpclient`` (what tritonclient's
HTTP client uses) when that package is installed. Not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import socket
import time
from collections.abc import Callable
from typing import Any

BODY = (
    b'{"inputs":[{"name":"INPUT0","shape":[1,16],"datatype":"INT32","data":'
    b"[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15]}],"
    b'"outputs":[{"name":"OUTPUT0"}]}'
)
ANSWER = (
    b'{"model_name":"simple","model_version":"1","outputs":[{"name":"OUTPUT0",'
    b'"datatype":"INT32","shape":[1,16],"data":[0,2,4,6,8,10,12,14,16,18,20,22,24,26,28,30]}]}'
)
RESPONSE = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (
    len(ANSWER),
    ANSWER,
)
TARGET = "/v2/models/simple/infer"


def _serve_connection(conn: socket.socket) -> None:
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    buf = b""
    while True:
        idx = buf.find(b"\r\n\r\n")
        if idx < 0:
            data = conn.recv(65536)
            if not data:
                return
            buf += data
            continue
        head = buf[:idx].lower()
        pos = head.find(b"content-length:")
        length = int(head[pos + 15 : head.find(b"\r\n", pos)].strip() or 0) if pos >= 0 else 0
        end = idx + 4 + length
        while len(buf) < end:
            data = conn.recv(65536)
            if not data:
                return
            buf += data
        buf = buf[end:]
        conn.sendall(RESPONSE)


def _server(port_queue: multiprocessing.Queue[int]) -> None:
    import threading

    listener = socket.create_server(("127.0.0.1", 0))
    port_queue.put(listener.getsockname()[1])
    while True:
        conn, _ = listener.accept()
        threading.Thread(target=_serve_connection, args=(conn,), daemon=True).start()


def _sync_runner(name: str, url: str, request: Any) -> tuple[Callable[[int], None], Any]:
    if name == "stdlib":
        from kserve_v2.transport import HTTPTransport

        transport: Any = HTTPTransport(url)
    elif name == "httpx":
        from kserve_v2.transport.httpx import HTTPXTransport

        transport = HTTPXTransport(url)
    else:  # geventhttpclient: what tritonclient.http uses
        from geventhttpclient import HTTPClient  # type: ignore[import-not-found]

        client = HTTPClient.from_url(url, concurrency=1)
        headers = {"Content-Type": "application/json"}

        def run_g(n: int) -> None:
            for _ in range(n):
                response = client.post(TARGET, body=BODY, headers=headers)
                response.read()
                assert response.status_code == 200

        return run_g, client

    def run(n: int) -> None:
        handle = transport.handle_request
        for _ in range(n):
            assert handle(request).status == 200

    return run, transport


def _measure_sync(name: str, url: str, request: Any, n: int) -> tuple[float, float]:
    run, closable = _sync_runner(name, url, request)
    try:
        run(min(500, n))  # warm up: connection, caches
        cpu0, wall0 = time.process_time(), time.perf_counter()
        run(n)
        cpu1, wall1 = time.process_time(), time.perf_counter()
    finally:
        closable.close()
    return (cpu1 - cpu0) / n * 1e6, (wall1 - wall0) / n * 1e6


def _measure_async(name: str, url: str, request: Any, n: int) -> tuple[float, float]:
    async def bench() -> tuple[float, float]:
        from kserve_v2.transport import AsyncHTTPTransport
        from kserve_v2.transport.httpx import AsyncHTTPXTransport

        transport: Any = AsyncHTTPTransport(url) if name == "aio" else AsyncHTTPXTransport(url)
        try:

            async def run(count: int) -> None:
                handle = transport.handle_async_request
                for _ in range(count):
                    assert (await handle(request)).status == 200

            await run(min(500, n))
            cpu0, wall0 = time.process_time(), time.perf_counter()
            await run(n)
            cpu1, wall1 = time.process_time(), time.perf_counter()
            return (cpu1 - cpu0) / n * 1e6, (wall1 - wall0) / n * 1e6
        finally:
            await transport.aclose()

    return asyncio.run(bench())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=10000, help="per round and transport")
    parser.add_argument("--rounds", type=int, default=3, help="the best round is reported")
    parser.add_argument("--transports", default="stdlib,aio,httpx,ahttpx,geventhttpclient")
    args = parser.parse_args()

    from kserve_v2.transport import HTTPRequest

    names = args.transports.split(",")
    if "geventhttpclient" in names:
        try:
            import geventhttpclient  # noqa: F401
        except ImportError:
            print("geventhttpclient: not installed, skipped")
            names.remove("geventhttpclient")
    unknown = set(names) - {"stdlib", "aio", "httpx", "ahttpx", "geventhttpclient"}
    if unknown:
        raise SystemExit(f"unknown transports: {sorted(unknown)}")

    ctx = multiprocessing.get_context("spawn")
    queue: multiprocessing.Queue[int] = ctx.Queue()
    server = ctx.Process(target=_server, args=(queue,), daemon=True)
    server.start()
    url = f"http://127.0.0.1:{queue.get(timeout=30)}"
    request = HTTPRequest(
        "POST", TARGET, headers=[("Content-Type", "application/json")], body=[BODY]
    )
    results: dict[str, list[tuple[float, float]]] = {name: [] for name in names}
    try:
        for _ in range(args.rounds):
            for name in names:  # interleaved, so that load changes hit all alike
                measure = _measure_async if name in ("aio", "ahttpx") else _measure_sync
                results[name].append(measure(name, url, request, args.requests))
    finally:
        server.terminate()
        server.join()

    print(
        f"{args.requests} sequential small POSTs per round, one keep-alive connection, "
        f"best of {args.rounds} rounds (median in brackets)"
    )
    print(f"{'transport':<18}{'client CPU/request':>26}{'wall/request':>24}")
    for name, rows in results.items():
        cpus = sorted(cpu for cpu, _ in rows)
        walls = sorted(wall for _, wall in rows)
        cpu, cpu_med = cpus[0], cpus[len(cpus) // 2]
        wall, wall_med = walls[0], walls[len(walls) // 2]
        print(
            f"{name:<18}{cpu:>11.1f} us ({cpu_med:>7.1f} us){wall:>11.1f} us ({wall_med:>7.1f} us)"
        )


if __name__ == "__main__":
    main()
