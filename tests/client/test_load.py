"""Load and leaks against the live Triton: 20,000 inferences at 64 in flight on each protocol
and API (HTTP and gRPC, sync on 64 threads and asyncio with 64 tasks, and one gRPC stream
with 64 requests outstanding), every result checked; then create/close cycles of clients.

Each run starts from a warm client (a first batch grew the pools, caches and allocator
arenas), and the process's resources are read from ``/proc`` before and after: open file
descriptors, threads (``threading`` and ``/proc/self/task``), resident memory, and the
``/dev/shm`` entries it holds open or mapped (the directory itself is shared with every other
process on the machine, Triton's Python backend included). Closing the client must give
every descriptor and thread back; memory may grow a little (allocator slack), not with the
request count.

``KSERVE_V2_LOAD_REQUESTS`` sets the count (default 20,000) for a quicker or a longer run;
each test prints its throughput and growth (``pytest -s`` shows them).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

from kserve_v2 import AsyncClient, Client, InferResult
from kserve_v2.testing import TritonServer

REQUESTS = int(os.environ.get("KSERVE_V2_LOAD_REQUESTS", "20000"))
IN_FLIGHT = 64
WARM_UP = 2 * IN_FLIGHT * 8  # every worker a few calls: connections open, code paths warm
CYCLES = 500  # clients created, used once and closed
#: Resident memory a warm client may still grow by over the run (allocator slack, not a
#: function of the request count: 20,000 requests leaking even 2 KiB each would pass it).
RSS_GROWTH_LIMIT = 30 << 20

# Distinct inputs, so that a response matched to the wrong request shows.
VARIANTS = 997
INPUT1 = np.ones((1, 16), dtype=np.int32)
INPUTS = [
    {"INPUT0": (np.arange(16, dtype=np.int32) + i).reshape(1, 16), "INPUT1": INPUT1}
    for i in range(VARIANTS)
]


def check(result: InferResult, i: int) -> None:
    x = INPUTS[i % VARIANTS]["INPUT0"]
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), x + 1)
    np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), x - 1)


@dataclass(frozen=True)
class Resources:
    """What the process holds, from /proc."""

    fds: int
    threads: int
    tasks: int
    rss: int
    shm: frozenset[str]  # /dev/shm entries this process has open or mapped
    shm_entries: int  # all of /dev/shm, for the report

    @classmethod
    def now(cls) -> Resources:
        with open("/proc/self/statm") as statm:
            rss_pages = int(statm.read().split()[1])
        return cls(
            fds=len(os.listdir("/proc/self/fd")),
            threads=threading.active_count(),
            tasks=os_threads(),
            rss=rss_pages * os.sysconf("SC_PAGE_SIZE"),
            shm=_held_shm(),
            shm_entries=len(os.listdir("/dev/shm")),
        )


def _held_shm() -> frozenset[str]:
    held = set()
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            target = os.readlink(f"/proc/self/fd/{fd}")
            if target.startswith("/dev/shm/"):
                held.add(target)
    with open("/proc/self/maps") as maps:
        for line in maps:
            path = line.split(maxsplit=5)[5:]
            if path and path[0].startswith("/dev/shm/"):
                held.add(path[0].rstrip("\n"))
    return frozenset(held)


#: OS threads that are not Python's (numpy's OpenBLAS starts its pool on import).
NATIVE_THREADS = len(os.listdir("/proc/self/task")) - threading.active_count()


def os_threads() -> int:
    """The process's OS threads (``/proc/self/task``) once they are Python's and the native
    ones, or after 5 s: a thread that ``join()`` saw end leaves the kernel's list a moment
    later, with nothing to wait on but the list itself."""
    deadline = time.monotonic() + 5
    while (count := len(os.listdir("/proc/self/task"))) != (
        threading.active_count() + NATIVE_THREADS
    ):
        if time.monotonic() > deadline:
            break
        time.sleep(0.01)
    return count


def check_resources(name: str, seconds: float, warm: Resources, after: Resources) -> None:
    """Report a run, then check what it left: ``warm`` was read after a first client ran its
    warm-up and closed, ``after`` after the measured client closed."""
    print(
        f"\n[load] {name}: {REQUESTS} requests at {IN_FLIGHT} in flight in {seconds:.1f} s "
        f"({REQUESTS / seconds:.0f}/s); RSS {(after.rss - warm.rss) / 2**20:+.1f} MiB "
        f"(from {warm.rss / 2**20:.0f} MiB); fds {warm.fds}->{after.fds}; "
        f"threads {warm.threads}->{after.threads} (tasks {warm.tasks}->{after.tasks}); "
        f"/dev/shm held {len(warm.shm)}->{len(after.shm)} "
        f"(entries on the machine {warm.shm_entries}->{after.shm_entries})"
    )
    assert after.rss - warm.rss < RSS_GROWTH_LIMIT
    assert after.fds == warm.fds
    assert after.threads == warm.threads
    assert after.tasks == warm.tasks
    assert after.shm == warm.shm


def shares(count: int) -> list[range]:
    """Request indices for each of the IN_FLIGHT workers."""
    return [range(worker, count, IN_FLIGHT) for worker in range(IN_FLIGHT)]


def run_threads(infer: Callable[[int], InferResult], count: int) -> None:
    def work(indices: range) -> None:
        for i in indices:
            check(infer(i), i)

    with ThreadPoolExecutor(IN_FLIGHT, thread_name_prefix="load") as pool:
        for future in [pool.submit(work, indices) for indices in shares(count)]:
            future.result()


async def run_tasks(infer: Callable[[int], Awaitable[InferResult]], count: int) -> None:
    async def work(indices: range) -> None:
        for i in indices:
            check(await infer(i), i)

    await asyncio.gather(*(work(indices) for indices in shares(count)))


# -- 20,000 requests per protocol and API --------------------------------------------------


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_sync_client_under_load(triton: TritonServer, protocol: str) -> None:
    url = triton.http_url if protocol == "http" else f"grpc://{triton.grpc_url}"

    def load(count: int) -> float:
        with Client(url, pool_size=IN_FLIGHT) as client:

            def infer(i: int) -> InferResult:
                return client.infer("simple", INPUTS[i % VARIANTS])

            started = time.perf_counter()
            run_threads(infer, count)
            return time.perf_counter() - started

    load(WARM_UP)
    warm = Resources.now()
    seconds = load(REQUESTS)
    check_resources(f"{protocol} Client, {IN_FLIGHT} threads", seconds, warm, Resources.now())


@pytest.mark.parametrize("protocol", ["http", "grpc"])
async def test_async_client_under_load(triton: TritonServer, protocol: str) -> None:
    url = triton.http_url if protocol == "http" else f"grpc://{triton.grpc_url}"

    async def load(count: int) -> float:
        async with AsyncClient(url, pool_size=IN_FLIGHT) as client:

            async def infer(i: int) -> InferResult:
                return await client.infer("simple", INPUTS[i % VARIANTS])

            started = time.perf_counter()
            await run_tasks(infer, count)
            return time.perf_counter() - started

    await load(WARM_UP)
    warm = Resources.now()
    seconds = await load(REQUESTS)
    check_resources(f"{protocol} AsyncClient, {IN_FLIGHT} tasks", seconds, warm, Resources.now())


async def test_grpc_stream_under_load(triton: TritonServer) -> None:
    async def load(count: int) -> float:
        async with AsyncClient(f"grpc://{triton.grpc_url}") as client, client.stream() as stream:

            async def infer(i: int) -> InferResult:
                request = await stream.send("simple", INPUTS[i % VARIANTS])
                (result,) = await request.results()
                return result

            started = time.perf_counter()
            await run_tasks(infer, count)
            return time.perf_counter() - started

    await load(WARM_UP)
    warm = Resources.now()
    seconds = await load(REQUESTS)
    check_resources(f"grpc stream, {IN_FLIGHT} outstanding", seconds, warm, Resources.now())


# -- clients created, used once and closed ---------------------------------------------------


def _cycle_sync(url: str) -> None:
    with Client(url) as client:
        assert client.is_server_ready()


async def _cycle_async(url: str) -> None:
    async with AsyncClient(url) as client:
        assert await client.is_server_ready()


@pytest.mark.parametrize("protocol", ["http", "grpc"])
@pytest.mark.parametrize("api", ["sync", "async"])
async def test_create_use_close_cycles_leave_nothing_behind(
    triton: TritonServer, protocol: str, api: str
) -> None:
    url = triton.http_url if protocol == "http" else f"grpc://{triton.grpc_url}"
    cycle: Callable[[str], Any] = _cycle_sync if api == "sync" else _cycle_async

    async def cycles(count: int) -> None:
        for _ in range(count):
            result = cycle(url)
            if asyncio.iscoroutine(result):
                await result

    await cycles(20)  # warm: imports, caches
    baseline = Resources.now()
    started = time.perf_counter()
    await cycles(CYCLES)
    seconds = time.perf_counter() - started
    after = Resources.now()
    print(
        f"\n[cycles] {protocol} {api}: {CYCLES} clients in {seconds:.1f} s; "
        f"RSS {(after.rss - baseline.rss) / 2**20:+.1f} MiB; fds {baseline.fds}->{after.fds}; "
        f"threads {baseline.threads}->{after.threads} (tasks {baseline.tasks}->{after.tasks})"
    )
    assert after.fds == baseline.fds
    assert after.threads == baseline.threads
    assert after.tasks == baseline.tasks
    assert after.rss - baseline.rss < RSS_GROWTH_LIMIT
