"""Totality of every decoder of server bytes, through the fuzz targets of ``fuzz/``.

Each target (:data:`fuzz.targets.TARGETS`) must, for any input, return or raise kserve_v2's
own error, within a time limit and an allocation bound (:func:`fuzz.run.check`). Here every
target runs under hypothesis on arbitrary bytes and on mutations of its seed corpus
(:mod:`fuzz.corpus`), ``KSERVE_V2_FUZZ_EXAMPLES`` examples each (default 250: some six
thousand inputs in all, derandomized under CI so that a run is repeatable), and for a moment
under atheris when an interpreter with it is at hand (``.venv-fuzz``, made by
``bash scripts/fuzz.sh``). Long runs: ``bash scripts/fuzz.sh [target] [seconds]``.

Findings are pinned as regression cases: here as inputs of a target, and next to the decoder's
own tests.
"""

from __future__ import annotations

import gzip
import importlib.util
import os
import random
import subprocess
import sys
import zlib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fuzz.corpus import seeds
from fuzz.mutate import mutate
from fuzz.run import ROOT, Finding, check
from fuzz.targets import TARGETS, run_one
from kserve_v2.testing.session import in_ci

_CI = in_ci()
EXAMPLES = int(os.environ.get("KSERVE_V2_FUZZ_EXAMPLES", "250"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,  # time is bounded by check() itself, per input
    derandomize=_CI,
    database=None if _CI else settings.default.database,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
NAMES = sorted(TARGETS)

#: Arbitrary bytes, with a first byte drawn apart so that every target option gets chosen.
ANY_BYTES = st.builds(lambda first, rest: bytes([first]) + rest, st.integers(0, 255), st.binary())


def test_every_target_has_seeds_and_they_pass() -> None:
    for name in NAMES:
        corpus = seeds(name)
        assert len(corpus) > 2, name
        for seed in corpus:
            check(name, seed)


@pytest.mark.parametrize("name", NAMES)
@FUZZ
@given(data=ANY_BYTES)
def test_arbitrary_bytes(name: str, data: bytes) -> None:
    check(name, data)


@pytest.mark.parametrize("name", NAMES)
@FUZZ
@given(seed=st.data(), rng=st.randoms(use_true_random=False))
def test_mutated_seeds(name: str, seed: st.DataObject, rng: random.Random) -> None:
    corpus = seeds(name)
    check(name, mutate(seed.draw(st.sampled_from(corpus)), rng, corpus))


def test_a_foreign_exception_is_a_finding(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(data: bytes) -> None:
        data[len(data)]

    monkeypatch.setitem(TARGETS, "broken", broken)
    with pytest.raises(Finding, match="IndexError"):
        check("broken", b"x")
    with pytest.raises(IndexError):
        run_one("broken", b"x")


def test_an_allocation_past_the_bound_is_a_finding(monkeypatch: pytest.MonkeyPatch) -> None:
    def greedy(data: bytes) -> None:
        bytearray(64 << 20)

    monkeypatch.setitem(TARGETS, "greedy", greedy)
    with pytest.raises(Finding, match="allocated"):
        check("greedy", b"x")


def test_a_hang_is_a_finding(monkeypatch: pytest.MonkeyPatch) -> None:
    def hangs(data: bytes) -> None:
        while True:
            pass

    monkeypatch.setitem(TARGETS, "hangs", hangs)
    with pytest.raises(Finding, match="longer than"):
        check("hangs", b"x", timeout=0.05)


# ------------------------------------------------------------------------------ findings


def _gzip_twice(size: int) -> bytes:
    inner = zlib.compressobj(9, zlib.DEFLATED, 31)
    zeros = bytes(1 << 20)
    return gzip.compress(
        b"".join([*(inner.compress(zeros) for _ in range(size >> 20)), inner.flush()])
    )


def test_a_streamed_body_gzipped_twice_stays_within_the_bound() -> None:
    """A 1-KiB streamed body with ``Content-Encoding: gzip, gzip`` decoded to 64 MiB in one
    piece (``StreamDecoder`` had no bound per piece): now a ProtocolError, within bounds."""
    body = _gzip_twice(64 << 20)
    head = b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip, gzip\r\nContent-Length: %d\r\n\r\n"
    assert check("http1_response", b"\x02" + head % len(body) + body).startswith("ProtocolError")


# ------------------------------------------------------------------------------ atheris


def _atheris_python() -> str | None:
    """An interpreter that has atheris: this one, or the one of ``.venv-fuzz``."""
    if importlib.util.find_spec("atheris") is not None:
        return sys.executable
    python = ROOT / ".venv-fuzz" / "bin" / "python"
    if python.exists():
        found = subprocess.run(
            [str(python), "-c", "import atheris"], capture_output=True, check=False
        )
        if found.returncode == 0:
            return str(python)
    return None


@pytest.mark.parametrize("name", NAMES)
def test_atheris_runs_the_target(name: str, tmp_path: Path) -> None:
    python = _atheris_python()
    if python is None:
        pytest.skip("atheris is not installed (bash scripts/fuzz.sh makes .venv-fuzz with it)")
    command = [python, "-m", "fuzz.run", name, "--driver", "atheris", "--", "-runs=2000"]
    env = {**os.environ, "KSERVE_V2_FUZZ_WORK": str(tmp_path)}
    done = subprocess.run(
        command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Done 2000 runs" in done.stderr, done.stderr[-3000:]
