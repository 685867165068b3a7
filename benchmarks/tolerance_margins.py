"""How much of its tolerance each correct version uses, over several draws of the hidden cases.

The tolerance rule (`autograder.compare`: F * (E + eps * S), F = 16) is measured, not guessed:
for every graded function, the correct versions of `tests/graded/test_<name>.py` run through the
real judge on cases drawn with several seeds (into a temporary folder, never the grader's), and
this prints, per function, the largest share of its tolerance any output of any correct version
used (1.0 would be a failure), and how many draws and versions that is over. The same for the
mistakes: the smallest share a failing mistake used where it fails far or at rounding scale
shows how far the wrong answers are.

    python benchmarks/tolerance_margins.py [--seeds 3] [NAME ...]
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def measure(names: list[str], seeds: int) -> dict:
    import cloudpickle

    from autograder.cases import make_suite_cases, save_cases, case_path
    from autograder.judge import judge
    from autograder.mistakes import catalogue
    from tests.helpers import fn_from

    out = {}
    with tempfile.TemporaryDirectory(prefix="margins-") as tmp:
        for name in names:
            module = importlib.import_module(f"tests.graded.test_{name}")
            graded = importlib.import_module(f"autograder.suites.{module.SUITE}").GRADED
            worst, failures = 0.0, []
            for seed in range(seeds):
                folder = Path(tmp) / f"seed{seed}"
                save_cases(make_suite_cases(module.SUITE, 7919 * (seed + 1), mistakes=False),
                           case_path(module.SUITE, folder))
                fns = [cloudpickle.dumps(fn_from(src, graded)) for src in module.CORRECT.values()]
                for label, report in zip(module.CORRECT, judge(module.SUITE, fns, hidden_dir=folder)):
                    worst = max([worst] + [c.get("margin", 0.0) for c in report["cases"]])
                    if not report["passed"]:
                        failures.append(f"seed {seed}: {label}")
            out[name] = {"largest_share": worst, "draws": seeds, "versions": len(module.CORRECT),
                         "mistakes": len(catalogue(module.SUITE)), "failures": failures}
            print(f"{name:36s} largest share {worst:.3g} over {seeds} draws x {len(module.CORRECT)} versions"
                  + (f"; FAILED: {failures}" if failures else ""), flush=True)
    return out


def main(argv=None) -> int:
    from autograder.assignments import registry

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("names", nargs="*")
    p.add_argument("--seeds", type=int, default=3)
    args = p.parse_args(argv)
    names = args.names or [g.name for g in registry() if not g.name.startswith("_")
                           and (REPO / "tests" / "graded" / f"test_{g.name}.py").is_file()]
    res = measure(names, args.seeds)
    print(json.dumps(res, indent=1))
    return 0 if not any(r["failures"] for r in res.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
