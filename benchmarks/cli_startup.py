"""How long ``kserve-v2 --help`` takes: the median of several fresh processes (target: 150 ms).

    .venv/bin/python benchmarks/cli_startup.py            # 11 runs of each command
    .venv/bin/python benchmarks/cli_startup.py --runs 21 --imports 15

Each command runs in a new interpreter (``python -m kserve_v2 ...`` from the repository root,
so this checkout's package is measured), timed from spawn to exit; the bare interpreter
(``python -c pass``) is measured the same way for reference. ``--imports N`` then lists the N
modules whose imports (with what they import) cost ``kserve-v2 --help`` the most
(``python -X importtime``), which is where to look when the target is missed. The exit status
is 1 when the median of ``--help`` is over the target, so CI can run it as a check.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET_MS = 150.0

COMMANDS: tuple[tuple[str, list[str]], ...] = (
    ("python -c pass (the interpreter alone)", ["-c", "pass"]),
    ("kserve-v2 --help", ["-m", "kserve_v2", "--help"]),
    ("kserve-v2 infer --help", ["-m", "kserve_v2", "infer", "--help"]),
    ("kserve-v2 perf --help", ["-m", "kserve_v2", "perf", "--help"]),
    ("python -c 'import kserve_v2'", ["-c", "import kserve_v2"]),
)


def time_runs(args: list[str], runs: int) -> list[float]:
    """Wall milliseconds of ``runs`` fresh interpreters running ``args``."""
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run([sys.executable, *args], cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
        times.append((time.perf_counter() - started) * 1000)
    return times


def heaviest_imports(args: list[str], top: int) -> list[tuple[int, int, str]]:
    """(cumulative µs, self µs, module) of the ``top`` costliest imports of ``args``."""
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", *args],
        cwd=ROOT,
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    rows = []
    for line in proc.stderr.splitlines():
        if not line.startswith("import time:") or "|" not in line or "self [us]" in line:
            continue
        own, cumulative, name = (part.strip() for part in line[12:].split("|"))
        rows.append((int(cumulative), int(own), name))
    return sorted(rows, reverse=True)[:top]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=11, help="fresh processes per command")
    parser.add_argument("--imports", type=int, default=12, help="heaviest imports to list")
    args = parser.parse_args()
    print(f"median of {args.runs} fresh runs (ms), {sys.executable}")
    help_median = 0.0
    for label, command in COMMANDS:
        times = time_runs(command, args.runs)
        median = statistics.median(times)
        if label == "kserve-v2 --help":
            help_median = median
        print(f"  {label:<40} {median:7.1f}  (min {min(times):.1f}, max {max(times):.1f})")
    verdict = "met" if help_median <= TARGET_MS else "NOT met"
    print(f"target: kserve-v2 --help <= {TARGET_MS:.0f} ms: {verdict} ({help_median:.1f} ms)")
    if args.imports:
        print("\nheaviest imports of kserve-v2 --help (cumulative ms, self ms):")
        for cumulative, own, name in heaviest_imports(["-m", "kserve_v2", "--help"], args.imports):
            print(f"  {cumulative / 1000:7.1f} {own / 1000:7.1f}  {name}")
    return 0 if help_median <= TARGET_MS else 1


if __name__ == "__main__":
    sys.exit(main())
