"""What both hostile-server kits check around an attacked call, and how they list their cases.

* :func:`attacked_call`: the call ends with the package's own error (the one the table names)
  or succeeds, within its timeout plus :data:`MARGIN`, adding a bounded amount of memory;
* :func:`nothing_left_behind`: no thread or socket outlives the block;
* :class:`AttackBase`: what a table's attack says (each kit's ``Attack`` adds its own fields);
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
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import pytest

from kserve_v2 import KServeError

T = TypeVar("T")
P = TypeVar("P")

#: What an attack expects of a call: the error it ends with, or None (it succeeds).
Expect = type[KServeError] | tuple[type[KServeError], ...] | None
#: What a call may take beyond its own timeout (a loaded 2-core machine).
MARGIN = 8.0
#: Memory a call may add (tracemalloc peak) unless its attack or its kit says otherwise: the
#: largest legitimate buffers of an HTTP/1.1 attack call are a 1 MiB first body buffer and a
#: 64 KiB head (the HTTP/2 kit allows more).
MEMORY = 4 << 20


@dataclass(frozen=True)
class AttackBase(Generic[P]):
    """What a hostile server does to a client (``act``, given the kit's peer ``P``), and what
    each kind of client must make of it."""

    act: Callable[[P], None]
    #: The error every kind gets (None: the call succeeds).
    error: Expect
    #: Per-kind exceptions to ``error``.
    errors: dict[str, Expect] = field(default_factory=dict)
    #: The call's timeout.
    timeout: float = 5.0
    memory: int = MEMORY
    #: Client options (e.g. a response size limit).
    options: dict[str, Any] = field(default_factory=dict)

    def expected(self, kind: str) -> Expect:
        return self.errors.get(kind, self.error)


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
