"""What recognising the known mistakes costs: making the cases, and the tests' many draws.

    python benchmarks/recognition_cost.py [--tests] [NAME ...]

Per suite, the seconds `make_suite_cases` takes without the known mistakes' signatures and with
them (what `ensure_cases`, `make_cases` and a kit's practice cases now pay, once per draw); with
`--tests`, also each suite's many-draws check (`tests.helpers.check_many_draws`) with
`named_draws=0` (every mistake held to its named cases only, as before recognition) and with its
default (signatures made and every mistake recognised on one draw in ten, 1 to NAMED_DRAWS of
them), at the draw count its grader.py sets (DRAWS).
Run it on a quiet machine: the figures are wall-clock seconds in one process with one torch thread.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def seconds(fn) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def test_seconds(suite: str) -> tuple[int, float, float]:
    """(draws, seconds without recognition, seconds with it) of the suite's many-draws test."""
    from autograder.suite_api import load_suite
    from tests.helpers import check_many_draws

    draws = getattr(load_suite(suite), "DRAWS", 40)
    before = seconds(lambda: check_many_draws(suite, named_draws=0))
    after = seconds(lambda: check_many_draws(suite))
    return draws, before, after


def main(argv: list[str] | None = None) -> int:
    import torch

    from autograder.cases import make_suite_cases
    from autograder.mistakes import catalogue_files

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="suites (default: every catalogue)")
    parser.add_argument("--tests", action="store_true", help="also time each suite's many-draws test both ways")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    totals = [0.0] * 4
    print("| suite | cases, s | cases and signatures, s |" + (" many draws | test without, s | test with, s |"
                                                              if args.tests else ""))
    print("|---|---|---|" + ("---|---|---|" if args.tests else ""))
    for suite in args.names or catalogue_files():
        make_suite_cases(suite, 0, mistakes=False)  # imports and first-use caches out of the figures
        plain = seconds(lambda: make_suite_cases(suite, 1, mistakes=False))
        signed = seconds(lambda: make_suite_cases(suite, 1))
        cells = [suite, f"{plain:.2f}", f"{signed:.2f}"]
        totals[0] += plain
        totals[1] += signed
        if args.tests:
            draws, before, after = test_seconds(suite)
            cells += [str(draws), f"{before:.1f}", f"{after:.1f}"]
            totals[2] += before
            totals[3] += after
        print("| " + " | ".join(cells) + " |", flush=True)
    print(f"| all | {totals[0]:.1f} | {totals[1]:.1f} |" + (f" | {totals[2]:.0f} | {totals[3]:.0f} |" if args.tests else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
