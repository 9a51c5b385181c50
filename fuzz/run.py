"""Run the fuzz targets for a while: with atheris (coverage-guided) when it is installed, else
with a plain mutation driver. ``bash scripts/fuzz.sh`` sets up ``.venv-fuzz`` and calls this.

Usage (from the repository root)::

    python -m fuzz.run --list
    python -m fuzz.run TARGET [--seconds 60] [--driver auto|atheris|plain] [-- LIBFUZZER_FLAGS]
    python -m fuzz.run all --seconds 60          # each target in turn, in its own process
    python -m fuzz.run TARGET FILE...            # replay inputs (a crash file, say)

Corpus: ``.work/fuzz/corpus/TARGET`` (seeded from :mod:`fuzz.corpus`, grown by the run);
findings: ``.work/fuzz/crashes/TARGET-<sha1>``. A finding is an exception that is not a
:class:`~kserve_v2.errors.KServeError`, an input that takes longer than ``--timeout``
seconds, or (plain driver) one whose decoding allocates more than :func:`memory_limit`
(atheris: a process over ``-rss_limit_mb``). The exit status is 1 after a finding.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import os
import random
import re
import signal
import subprocess
import sys
import time
import traceback
import tracemalloc
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Final

__all__ = ["Finding", "check", "main", "memory_limit", "time_limit"]

ROOT: Final = Path(__file__).resolve().parent.parent
#: Where corpora and findings go (``KSERVE_V2_FUZZ_WORK`` moves it, e.g. for the tests).
WORK: Final = Path(os.environ.get("KSERVE_V2_FUZZ_WORK") or ROOT / ".work" / "fuzz")
#: Seconds one input may take (a hang, or a loop driven by announced sizes).
DEFAULT_TIMEOUT: Final = 10.0
# An outcome's signature: the error's kind and the first words of its message that are only
# letters (numbers, quoted values and pieces of the input left out, so signatures are few).
_WORD: Final = re.compile(r"(?<!\S)[A-Za-z]+(?!\S)")
#: Inputs the plain driver adds to a corpus in one run, at most.
MAX_NEW_INPUTS: Final = 1000


def memory_limit(data: bytes) -> int:
    """Bytes a target may allocate at peak for ``data``: every target caps what it builds at
    :data:`fuzz.targets.LIMIT` (1 MiB), so a few times that plus a multiple of the input."""
    return (16 << 20) + 64 * len(data)


class Finding(Exception):
    """A target broke its contract on an input (the cause, when there is one, is chained)."""


class _Hang(BaseException):
    # A BaseException, so that no ``except Exception`` in a decoder swallows it.
    pass


def _alarm(signum: int, frame: FrameType | None) -> None:
    raise _Hang


@contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Raise :class:`Finding` when the block runs longer than ``seconds`` (main thread only:
    elsewhere no limit is set)."""
    if seconds <= 0 or not hasattr(signal, "setitimer"):
        yield
        return
    try:
        previous = signal.signal(signal.SIGALRM, _alarm)
    except ValueError:  # not the main thread
        yield
        return
    # An outer timer (pytest-timeout's, say) is put back afterwards with what it had left.
    outer, interval = signal.setitimer(signal.ITIMER_REAL, seconds)
    started = time.monotonic()
    try:
        yield
    except _Hang:
        raise Finding(f"took longer than {seconds} s") from None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if outer:
            left = max(outer - (time.monotonic() - started), 0.001)
            signal.setitimer(signal.ITIMER_REAL, left, interval)


def check(name: str, data: bytes, *, timeout: float = DEFAULT_TIMEOUT, memory: bool = True) -> str:
    """Run target ``name`` on ``data`` under the time (and, with ``memory``, allocation)
    limits; return a signature of the outcome ("ok" or the error's kind and message with its
    values left out). Raises :class:`Finding` when the contract is broken."""
    from fuzz.targets import TARGETS
    from kserve_v2.errors import KServeError, ServerError

    target = TARGETS[name]
    tracing = memory and not tracemalloc.is_tracing()
    if tracing:
        tracemalloc.start()
    elif memory:
        tracemalloc.reset_peak()
    try:
        with time_limit(timeout):
            try:
                target(data)
            except KServeError as exc:
                # A ServerError's message is the server's (the input's) text.
                words = [] if isinstance(exc, ServerError) else _WORD.findall(str(exc))[:6]
                outcome = " ".join([type(exc).__name__, *words])
            except RecursionError as exc:
                raise Finding(f"{type(exc).__name__}: {str(exc)[:200]}") from None
            except Exception as exc:
                raise Finding(f"{type(exc).__name__}: {str(exc)[:200]}") from exc
            else:
                outcome = "ok"
        if memory:
            peak = tracemalloc.get_traced_memory()[1]
            if peak > memory_limit(data):
                raise Finding(f"allocated {peak} bytes for a {len(data)}-byte input")
    finally:
        if tracing:
            tracemalloc.stop()
    return outcome


def _save(name: str, data: bytes) -> Path:
    crashes = WORK / "crashes"
    crashes.mkdir(parents=True, exist_ok=True)
    path = crashes / f"{name}-{hashlib.sha1(data).hexdigest()}"
    path.write_bytes(data)
    return path


def _report(name: str, data: bytes, finding: Finding) -> int:
    path = _save(name, data)
    print(f"\n== FINDING in {name}: {finding}", file=sys.stderr)
    traceback.print_exception(finding.__cause__ or finding, file=sys.stderr)
    print(f"input ({len(data)} bytes): {data[:200]!r}", file=sys.stderr)
    print(f"saved as {path}; replay: python -m fuzz.run {name} {path}", file=sys.stderr)
    return 1


def _corpus(name: str) -> Path:
    from fuzz.corpus import write

    return write(WORK / "corpus", name)


def replay(name: str, files: Sequence[str], timeout: float) -> int:
    """Run ``name`` on each file; 1 if any is a finding."""
    status = 0
    for file in files:
        data = Path(file).read_bytes()
        try:
            outcome = check(name, data, timeout=timeout)
        except Finding as finding:
            status = _report(name, data, finding)
        else:
            print(f"{file}: {outcome}")
    return status


def plain(name: str, seconds: float, seed: int | None, timeout: float) -> int:
    """The plain driver: mutate corpus inputs at random, keep each input whose outcome
    (success, or an error of a kind and message not seen before) is new."""
    from fuzz.mutate import mutate

    folder = _corpus(name)
    corpus = [path.read_bytes() for path in sorted(folder.iterdir())]
    start_size = len(corpus)
    outcomes: set[str] = set()
    rng = random.Random(seed)
    start = time.monotonic()
    deadline = start + seconds
    runs = 0
    last_report = start
    print(f"{name}: plain driver, {len(corpus)} inputs in {folder}, seed {seed}", file=sys.stderr)
    while True:
        now = time.monotonic()
        if now >= deadline:
            break
        if now - last_report >= 10:
            last_report = now
            print(f"  #{runs} {runs / (now - start):.0f}/s corpus {len(corpus)}", file=sys.stderr)
        # The corpus itself first, then mutations of it.
        fresh = runs >= len(corpus)
        data = mutate(rng.choice(corpus), rng, corpus)[:65536] if fresh else corpus[runs]
        runs += 1
        try:
            outcome = check(name, data, timeout=timeout)
        except Finding as finding:
            return _report(name, data, finding)
        if outcome not in outcomes:
            outcomes.add(outcome)
            if fresh and len(corpus) < start_size + MAX_NEW_INPUTS:
                corpus.append(data)
                (folder / hashlib.sha1(data).hexdigest()).write_bytes(data)
    elapsed = time.monotonic() - start
    print(
        f"{name}: done, {runs} runs in {elapsed:.0f} s ({runs / elapsed:.0f}/s), "
        f"corpus {len(corpus)}, {len(outcomes)} distinct outcomes, no finding",
        file=sys.stderr,
    )
    return 0


def atheris_driver(name: str, seconds: float, timeout: float, flags: Sequence[str]) -> int:
    """Coverage-guided fuzzing with atheris (libFuzzer); never returns (libFuzzer exits)."""
    import atheris

    # Coverage of the package's code (and the targets') guides the search: instrumented as
    # it is imported, which must therefore happen here first.
    assert "kserve_v2" not in sys.modules, "imported before atheris could instrument it"
    with atheris.instrument_imports(include=["kserve_v2", "fuzz"]):
        from fuzz.targets import TARGETS, run_one

        folder = _corpus(name)
    if name not in TARGETS:
        raise SystemExit(f"unknown target {name!r} (see --list)")

    def test_one_input(data: bytes) -> None:
        run_one(name, data)

    crashes = WORK / "crashes"
    crashes.mkdir(parents=True, exist_ok=True)
    argv = [
        sys.argv[0],
        str(folder),
        f"-max_total_time={max(1, int(seconds))}",
        f"-timeout={max(1, int(timeout))}",
        "-rss_limit_mb=2048",
        "-max_len=8192",
        f"-artifact_prefix={crashes}/{name}-",
        "-print_final_stats=1",
        *flags,
    ]
    atheris.Setup(argv, test_one_input)
    atheris.Fuzz()
    return 0  # pragma: no cover - libFuzzer exits the process


def _has_atheris() -> bool:
    return importlib.util.find_spec("atheris") is not None


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    flags: list[str] = []
    if "--" in args_list:
        split = args_list.index("--")
        args_list, flags = args_list[:split], args_list[split + 1 :]
    parser = argparse.ArgumentParser(prog="python -m fuzz.run", description=__doc__.split("\n")[0])
    parser.add_argument("target", nargs="?", help="a target name, or 'all'")
    parser.add_argument("inputs", nargs="*", help="files to replay instead of fuzzing")
    parser.add_argument("--list", action="store_true", help="list the targets and exit")
    parser.add_argument("--seconds", type=float, default=60.0, help="how long (each target)")
    parser.add_argument("--driver", choices=("auto", "atheris", "plain"), default="auto")
    parser.add_argument("--seed", type=int, default=None, help="plain driver's random seed")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, help="per input, s")
    args = parser.parse_args(args_list)
    driver = args.driver
    if driver == "auto":
        driver = "atheris" if _has_atheris() else "plain"
    if driver == "atheris" and args.target not in (None, "all") and not args.inputs:
        return atheris_driver(args.target, args.seconds, args.timeout, flags)

    from fuzz.targets import TARGETS

    if args.list or not args.target:
        for name, target in TARGETS.items():
            summary = re.sub(r":\w+:`~?|`", "", " ".join((target.__doc__ or "").split()))
            print(f"{name:20} {summary.split(': byte')[0].split(' (')[0][:78]}")
        return 0
    if args.target == "all":
        status = 0
        for name in TARGETS:
            command = [sys.executable, "-m", "fuzz.run", name, *args_list[1:]]
            if flags:
                command += ["--", *flags]
            status |= subprocess.call(command, cwd=ROOT)
        return status
    if args.target not in TARGETS:
        parser.error(f"unknown target {args.target!r} (see --list)")
    if args.inputs:
        return replay(args.target, args.inputs, args.timeout)
    return plain(args.target, args.seconds, args.seed, args.timeout)


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))  # this checkout's kserve_v2, not an installed one
    os.chdir(ROOT)
    sys.exit(main())
