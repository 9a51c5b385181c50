"""What both hostile-server kits measure around an attacked call: memory and descriptors."""

from __future__ import annotations

import contextlib
import os
import tracemalloc
from collections.abc import Iterator


def open_fds() -> set[str]:
    """The process's open file descriptors."""
    return set(os.listdir("/proc/self/fd"))


@contextlib.contextmanager
def memory_growth() -> Iterator[list[int]]:
    """Peak memory growth over the block (tracemalloc), in the list it yields."""
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    out: list[int] = []
    try:
        yield out
    finally:
        out.append(tracemalloc.get_traced_memory()[1] - base)
        tracemalloc.stop()
