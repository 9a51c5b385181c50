"""What a thread's wake-up costs on this machine, in CPU time charged to the process.

A client with requests in flight sleeps until the next response arrives; when the server
answers one request at a time, it wakes about once per response. This measures the CPU time
charged to the process for the same small piece of Python work (about what a small inference
costs the client) run back to back, and run right after a sleep of each length: for the work
alone (slower when caches went cold) and for the whole cycle (the sleep's system call, the
switch out and back in, and the work). A sleep's own length costs no CPU, so what the cycle
costs beyond the work back to back is what one wake-up costs here. On the 2-core virtual
machine the project's benchmarks ran on it was tens of µs (see the README), as much as the
client's own work for a small request: a client that sleeps between responses pays it per
request, one that finds responses queued does not.

    .venv/bin/python benchmarks/wake_cost.py [--rounds N]
"""

from __future__ import annotations

import argparse
import functools
import select
import socket
import statistics
import time
from collections.abc import Callable, Sequence

#: Sleep lengths (seconds) after which the work runs.
GAPS = (0.00005, 0.0001, 0.0002, 0.0005, 0.001)


def work() -> int:
    """Interpreter work of a few tens of µs: arithmetic, a dict, a list (no I/O)."""
    total = 0
    table: dict[int, int] = {}
    items: list[int] = []
    for i in range(400):
        total += i * i
        table[i & 31] = total
        items.append(total)
    return total + len(items)


def _cpu_per_call(before: Callable[[], object], calls: int) -> tuple[float, float]:
    """CPU seconds per call of work() run right after ``before()``: of the work alone, and
    of the whole cycle (``before()``, the wait included, then the work)."""
    alone = 0.0
    cycle_start = time.process_time()
    for _ in range(calls):
        before()
        start = time.process_time()
        work()
        alone += time.process_time() - start
    return alone / calls, (time.process_time() - cycle_start) / calls


def measure(rounds: int, calls: int) -> list[tuple[str, float, float]]:
    """For each way of waiting, the medians over ``rounds`` of the CPU µs per call: of the
    work alone, and of the whole cycle."""
    reader, writer = socket.socketpair()
    poller = select.epoll()
    poller.register(reader.fileno(), select.EPOLLIN)
    waits: list[tuple[str, Callable[[], object]]] = [("back to back", lambda: None)]
    for gap in GAPS:
        waits.append((f"after a {gap * 1e6:.0f} µs sleep", functools.partial(time.sleep, gap)))
    # epoll_wait, as an event loop sleeps (its timeout has millisecond granularity).
    waits.append(("after epoll_wait(1 ms)", lambda: poller.poll(0.001)))
    try:
        samples: dict[str, list[tuple[float, float]]] = {name: [] for name, _ in waits}
        for _ in range(rounds):
            for name, before in waits:
                samples[name].append(_cpu_per_call(before, calls))
    finally:
        poller.close()
        reader.close()
        writer.close()
    return [
        (
            name,
            statistics.median(alone for alone, _ in values) * 1e6,
            statistics.median(cycle for _, cycle in values) * 1e6,
        )
        for name, values in samples.items()
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=1000, help="work() calls per round and wait")
    args = parser.parse_args(argv)
    results = measure(args.rounds, args.calls)
    base = results[0][2]
    print("| work() run | CPU µs: the work | CPU µs: wait + work | extra over back to back |")
    print("| --- | ---: | ---: | ---: |")
    for name, alone, cycle in results:
        print(f"| {name} | {alone:.1f} | {cycle:.1f} | {cycle - base:+.1f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
