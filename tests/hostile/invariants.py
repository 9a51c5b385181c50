"""What both hostile-server kits check around an attacked call, and how they list their cases.

* :func:`attacked_call`: the call ends with the package's own error (the one the table names)
  or succeeds, within its timeout plus :data:`MARGIN`, adding a bounded amount of memory;
* :func:`nothing_left_behind`: no thread or socket outlives the block;
* :func:`cases`: a table's (attack, client kind) pairs as pytest parameters, those in its
  ``KNOWN`` as strict xfails (a fix shows, a new deviation fails).
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
import tracemalloc
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from typing import Any, TypeVar

import pytest

from kserve_v2 import KServeError

T = TypeVar("T")

#: What an attack expects of a call: the error it ends with, or None (it succeeds).
Expect = type[KServeError] | tuple[type[KServeError], ...] | None
#: What a call may take beyond its own timeout (a loaded 2-core machine).
MARGIN = 8.0


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


def attacked_call(call: Callable[[], T], expected: Expect, timeout: float, memory: int) -> T | None:
    """Make the attacked ``call`` (whose own deadline is ``timeout``) and check it: it raises
    ``expected``, a :class:`~kserve_v2.KServeError`, or returns when ``expected`` is None;
    within ``timeout`` + :data:`MARGIN`; adding less than ``memory`` bytes at its peak.
    Returns what the call returned (None when it raised)."""
    result: T | None = None
    started = time.monotonic()
    with memory_growth() as growth:
        if expected is None:
            result = call()
        else:
            with pytest.raises(expected) as caught:
                call()
            assert isinstance(caught.value, KServeError)
    took = time.monotonic() - started
    assert took < timeout + MARGIN, f"the call took {took:.1f} s"
    assert growth[0] < memory, f"the call added {growth[0] >> 10} KiB"
    return result


@contextlib.contextmanager
def nothing_left_behind(check: bool = True) -> Iterator[None]:
    """Fail if a thread or a descriptor opened in the block is still there after it (checked
    only when the block succeeded: its own failure is the one to see)."""
    threads_before = set(threading.enumerate())
    fds_before = open_fds()
    yield
    if check:
        leftover = [t for t in threading.enumerate() if t not in threads_before and t.is_alive()]
        assert not leftover, f"threads left behind: {leftover}"
        assert open_fds() <= fds_before, "sockets left behind"


def cases(
    pairs: Iterable[tuple[str, str]],
    known: Mapping[tuple[str, str], str],
    not_run: Collection[tuple[str, str]] = (),
) -> list[Any]:
    """The (attack name, client kind) ``pairs`` as pytest parameters with ids; the pairs in
    ``known`` are strict xfails with its reason, and those also in ``not_run`` are listed
    but not run (they take too long, or leave something behind that would fail another
    test)."""
    return [
        pytest.param(
            name,
            kind,
            id=f"{name}-{kind}",
            marks=[
                pytest.mark.xfail(
                    reason=known[name, kind], strict=True, run=(name, kind) not in not_run
                )
            ]
            if (name, kind) in known
            else [],
        )
        for name, kind in pairs
    ]
