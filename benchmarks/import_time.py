"""What ``import kserve_v2`` costs on top of ``import numpy`` (its one required dependency).

    .venv/bin/python benchmarks/import_time.py [--runs 15] [--top 15] [--statement "..." ...]

Each run is a fresh interpreter under ``python -X importtime``; the statements' runs are
interleaved, so a machine that gets busier or quieter affects all alike. For each statement,
as medians over the runs:

* ``total``: its whole import time (the sum of the top-level entries ``-X importtime`` prints,
  ``site`` and the other start-up imports included);
* ``vs numpy``: that total minus the total of ``import numpy`` (the difference the target is
  about; between-run noise is in it, both totals carry it);
* ``added``: the cumulative time of the imports that ``import numpy`` does not do, summed inside
  each run: the same quantity without the noise between runs, and the figure the target is
  judged on.

The first statement is ``import numpy; import kserve_v2``; the others show what first use
costs (a lazily imported name loads its module then). Then the modules that cost most (self
time, median) in the first statement beyond what ``import numpy`` imports.

The imports read cached bytecode, as those of an installed package do: the runs write and read
it under a temporary ``PYTHONPYCACHEPREFIX`` (so the worktree stays clean, and
``PYTHONDONTWRITEBYTECODE`` is ignored), after one untimed run of each statement fills it.

``-X importtime`` measures wall time in microseconds: on a busy machine the numbers are noisy,
so compare medians of many runs, taken on the same machine at the same time. The project's
target: ``import kserve_v2`` adds at most 25 ms to ``import numpy``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BASELINE = "import numpy"
STATEMENTS = (
    "import numpy; import kserve_v2",
    "import numpy; from kserve_v2 import InferInput, InferResult",
    "import numpy; from kserve_v2 import Client",
    "import numpy; from kserve_v2 import AsyncClient",
)
TARGET_MS = 25.0

#: One run's imports: ``{module: (self µs, cumulative µs, depth)}``.
Imports = dict[str, tuple[int, int, int]]


def importtime(statement: str, python: str, env: dict[str, str]) -> Imports:
    """The imports of ``statement`` in one fresh interpreter."""
    run = subprocess.run(
        [python, "-X", "importtime", "-c", statement],
        cwd=ROOT,  # the worktree's kserve_v2, as in the tests
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    modules: Imports = {}
    for line in run.stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        self_us, cumulative_us, name = line[len("import time:") :].split("|")
        depth = (len(name) - len(name.lstrip())) // 2
        modules[name.strip()] = (int(self_us), int(cumulative_us), depth)
    return modules


def total_us(modules: Imports, skip: set[str] | frozenset[str] = frozenset()) -> int:
    """The time of the top-level imports (those not in ``skip``): all the imports they did."""
    return sum(
        cumulative
        for name, (_, cumulative, depth) in modules.items()
        if depth == 0 and name not in skip
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=15, help="runs per statement (>= 9)")
    parser.add_argument("--top", type=int, default=15, help="costliest added modules to list")
    parser.add_argument("--python", default=sys.executable, help="interpreter to measure")
    parser.add_argument(
        "--statement",
        action="append",
        help="statement(s) to compare with 'import numpy' (default: the package's four)",
    )
    args = parser.parse_args()
    if args.runs < 9:
        parser.error("--runs must be at least 9 for a meaningful median")
    statements = tuple(args.statement or STATEMENTS)

    with tempfile.TemporaryDirectory(prefix="kserve-v2-import-time-") as cache:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["PYTHONPYCACHEPREFIX"] = cache
        for statement in (BASELINE, *statements):  # fill the bytecode cache
            importtime(statement, args.python, env)
        measure(statements, args, env)


def measure(statements: tuple[str, ...], args: argparse.Namespace, env: dict[str, str]) -> None:
    baseline: list[int] = []
    totals: dict[str, list[int]] = defaultdict(list)
    added: dict[str, list[int]] = defaultdict(list)
    self_times: dict[str, list[int]] = defaultdict(list)
    baseline_modules: set[str] = set()
    for _ in range(args.runs):
        before = importtime(BASELINE, args.python, env)
        baseline.append(total_us(before))
        baseline_modules.update(before)
        top_level = {name for name, (_, _, depth) in before.items() if depth == 0}
        for statement in statements:
            after = importtime(statement, args.python, env)
            totals[statement].append(total_us(after))
            added[statement].append(total_us(after, top_level))
            if statement == statements[0]:
                for name, (self_us, _, _) in after.items():
                    self_times[name].append(self_us)

    base_ms = statistics.median(baseline) / 1000
    width = max(len(s) for s in (BASELINE, *statements)) + 2
    print(f"{args.runs} runs per statement ({args.python}); medians in ms")
    print(f"  {'statement':{width}} {'total':>8} {'vs numpy':>9} {'added':>8}")
    print(f"  {BASELINE!r:{width}} {base_ms:8.1f}")
    for statement in statements:
        total_ms = statistics.median(totals[statement]) / 1000
        added_ms = statistics.median(added[statement]) / 1000
        print(f"  {statement!r:{width}} {total_ms:8.1f} {total_ms - base_ms:9.1f} {added_ms:8.1f}")
    first = statistics.median(added[statements[0]]) / 1000
    verdict = "met" if first <= TARGET_MS else "NOT met"
    print(f"target: {statements[0]!r} adds at most {TARGET_MS:.0f} ms: {verdict} ({first:.1f} ms)")

    extra = {
        name: statistics.median(times)
        for name, times in self_times.items()
        if name not in baseline_modules
    }
    print(f"\n{statements[0]!r}: {len(extra)} modules beyond numpy's; the costliest (self time):")
    for name, us in sorted(extra.items(), key=lambda item: -item[1])[: args.top]:
        print(f"  {us / 1000:7.2f} ms  {name}")


if __name__ == "__main__":
    main()
