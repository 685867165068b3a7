"""Generate the hidden cases of every suite (or the named ones) on the grader's side.

    python -m autograder.make_cases [NAME ...] [--seed N] [--out DIR]

The inputs come from each suite's `make_inputs` with a secret seed (`--seed`, else the
AUTOGRADER_SEED environment variable, else fresh randomness); the expected outputs are the
float64 truth of the `course_lib` reference, with tolerances measured on each case
(`autograder.cases`). The files go to `autograder/hidden/` (git-ignored): they are never
committed, never copied into `notebooks/`, and never visible to a student's code while grading
(the sandbox is built without them).
"""

from __future__ import annotations

import argparse
import os
import secrets
import sys
from pathlib import Path

from .cases import HIDDEN_DIR, case_path, make_suite_cases, save_cases
from .suite_api import suite_names


def default_seed() -> int:
    env = os.environ.get("AUTOGRADER_SEED")
    return int(env) if env else secrets.randbits(63)


def make_cases(names: list[str] | None = None, seed: int | None = None, out: Path | None = None) -> list[Path]:
    out = Path(out or HIDDEN_DIR)
    seed = default_seed() if seed is None else seed
    written = []
    for i, name in enumerate(names or suite_names()):
        path = case_path(name, out)
        save_cases(make_suite_cases(name, seed + i), path)
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="suites to generate (default: all)")
    parser.add_argument("--seed", type=int, default=None, help="secret seed (default: AUTOGRADER_SEED or random)")
    parser.add_argument("--out", type=Path, default=None, help="folder for the case files (default: autograder/hidden)")
    args = parser.parse_args(argv)
    for path in make_cases(args.names or None, args.seed, args.out):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
