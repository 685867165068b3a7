"""How much of its tolerance each correct version uses, over many draws of the hidden cases.

The tolerance rule (`autograder.compare`: F * (E + eps * S) + F * eps * |truth| + B, with B the
case's rounding bound of `autograder.rounding`) is measured, not guessed: for every graded
function, the correct versions of its grader.py (`autograder/graded/<name>/`) run in this process (the judge's
comparison, `autograder.compare.compare`) on `--draws` draws of its cases (seeds from
`--first-seed` on). Per function this prints:

- the correct versions' failures without the bound (the rule before it: draws, and (draw, case,
  version) triples) and with it;
- the largest share of its tolerance any output of any correct version used, with the bound, on
  the first `--bounded` draws (every case made with its bound there; on the other draws only the
  cases a version fails without it are: a bound only widens a tolerance);
- on those draws, the smallest share a catalogued mistake used on the cases it names (below 1:
  the case no longer catches it).

    python benchmarks/tolerance_margins.py [--draws 100] [--bounded 10] [--first-seed 2000] [NAME ...]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def measure(name: str, draws: int, bounded: int, first_seed: int) -> dict:
    from autograder.cases import bounded_case, make_suite_cases
    from autograder.compare import margin
    from autograder.mistakes import catalogue
    from autograder.signatures import mistake_results
    from autograder.suite_api import load_suite, run_case
    from tests.helpers import fn_from

    suite = load_suite(name)
    fns = {label: fn_from(src, suite.GRADED) for label, src in suite.CORRECT.items()}
    mistakes = catalogue(name)
    before, after, draws_before, share, caught = [], [], 0, 0.0, {}
    start = time.perf_counter()
    for seed in range(first_seed, first_seed + draws):
        cases = make_suite_cases(name, seed, mistakes=False, bounds=False)["cases"]
        failed_draw = False
        for case in cases:
            outputs = {label: run_case(suite, fn, case["inputs"]) for label, fn in fns.items()}
            failing = [label for label, out in outputs.items() if _problems(out, case)]
            if not failing and seed >= first_seed + bounded:
                continue
            graded = bounded_case(suite, case)
            before += [(seed, case["name"], label) for label in failing]
            failed_draw |= bool(failing)
            after += [(seed, case["name"], label) for label in failing if _problems(outputs[label], graded)]
            if seed < first_seed + bounded:
                share = max([share] + [margin(out, graded["expected"]) for out in outputs.values()
                                       if "__error__" not in out])
                case["graded"] = graded
        draws_before += failed_draw
        if seed < first_seed + bounded:
            by_name = {case["name"]: case for case in cases}
            for label, m in mistakes.items():
                results = mistake_results(suite, m.source, [by_name[n] for n in m.cases])
                for n in m.cases:
                    got = results[n]
                    used = math.inf if "error" in got else _missed_by(got["outputs"], by_name[n]["graded"])
                    caught[label] = min(caught.get(label, math.inf), used)
    weakest = min(caught.items(), key=lambda kv: kv[1], default=(None, None))
    return {"draws": draws, "versions": len(fns), "failures_without_bound": len(before),
            "draws_failed_without_bound": draws_before, "failures_with_bound": len(after),
            "largest_share_with_bound": share, "bounded_draws": min(bounded, draws),
            "mistakes_no_longer_caught": sorted(label for label, used in caught.items() if used <= 1.0),
            "weakest_mistake": weakest[0], "its_smallest_share": weakest[1],
            "examples_without_bound": before[:3], "seconds": round(time.perf_counter() - start, 1)}


def _problems(out: dict, case: dict) -> list:
    from autograder.compare import compare

    if "__error__" in out:
        return [out["__error__"]]
    try:
        return compare(out, case["expected"], {})
    except Exception as err:  # noqa: BLE001 - the judge records it as a failed case
        return [repr(err)]


def _missed_by(outputs, case: dict) -> float:
    """How many tolerances a mistake's outputs miss a case by: 0 where they pass it, inf where a
    structure or an exact value is wrong."""
    from autograder.compare import margin

    problems = _problems(outputs, case)
    if not problems:
        return 0.0
    if any(not isinstance(p, dict) or p["what"] != "value" for p in problems):
        return math.inf
    return margin(outputs, case["expected"])


def main(argv=None) -> int:
    from autograder.suite_api import suite_names

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("names", nargs="*")
    p.add_argument("--draws", type=int, default=100)
    p.add_argument("--bounded", type=int, default=10)
    p.add_argument("--first-seed", type=int, default=2000)
    args = p.parse_args(argv)
    results = {}
    for name in args.names or suite_names():
        r = results[name] = measure(name, args.draws, args.bounded, args.first_seed)
        print(f"{name:36s} {r['draws']} draws x {r['versions']} versions: failed without the bound "
              f"{r['failures_without_bound']} ({r['draws_failed_without_bound']} draws), with it "
              f"{r['failures_with_bound']}; largest share with it {r['largest_share_with_bound']:.3g} "
              f"({r['bounded_draws']} draws); weakest mistake {r['weakest_mistake']} "
              f"{r['its_smallest_share'] if r['its_smallest_share'] is None else format(r['its_smallest_share'], '.3g')}"
              f"{'; NO LONGER CAUGHT: ' + ', '.join(r['mistakes_no_longer_caught']) if r['mistakes_no_longer_caught'] else ''}"
              f" [{r['seconds']} s]", flush=True)
    print(json.dumps(results, indent=1))
    return 0 if not any(r["failures_with_bound"] or r["mistakes_no_longer_caught"] for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
