"""Recognition of the known mistakes, measured: per notebook, the share of its graded functions'
catalogued mistakes that the judge names when each is submitted alone, and whether a correct
version is ever named.

    python benchmarks/recognition_rates.py [--draws 8] [--judge] [--per-function] [NAME ...]

On `--draws` draws of every suite's cases (seeds 0 .. N-1, made in this process as the case
generator makes them, each mistake run as the judge runs it: `autograder.signatures`), each
mistake's own outputs are recognised against every mistake's signature; with `--judge`, also every
mistake, correct version and other implementation of a mistake (tests/graded: CORRECT,
SAME_MISTAKES) through the real judge on the hidden draw (autograder/hidden/, made when missing).
A mistake counts as named when recognition names it on every draw, alone when nothing else is
named with it ("not recognisable": those the catalogue marks so, left out of the rates); "together" counts mistakes named with another on some draw (outputs the draw's
cases cannot tell apart: both names are shown); "empty" counts mistakes whose signature was empty
on some draw (they pass every case there, so nothing can name them), "near ties" those whose
tree fell back to their own run on some case. The tests hold the same rates (tests/graded:
`corpus_tests` through the judge, `many_draws_test` on 1 to 4 draws).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def in_process(suite: str, draws: int) -> dict:
    """Per mistake over `draws` draws: named every time, alone every time, the others named with
    it, empty or near-tie draws; and whether a correct version failed or was named."""
    from autograder.cases import make_suite_cases
    from autograder.mistakes import catalogue
    from autograder.recognition import recognise
    from autograder.signatures import draw_signatures
    from autograder.suite_api import load_suite, suite_settings

    module = load_suite(suite)
    settings = suite_settings(module)
    stats = {name: {"named": 0, "alone": 0, "with": set(), "empty": 0, "near": 0}
             for name, m in catalogue(suite).items() if m.recognisable}
    for seed in range(draws):
        cases = make_suite_cases(suite, seed, mistakes=False)["cases"]
        signatures, results = draw_signatures(suite, module, cases)
        for name, s in stats.items():
            names = [m["name"] for m in recognise(results[name], signatures, settings)]
            s["named"] += name in names
            s["alone"] += names == [name]
            s["with"] |= set(names) - {name}
            s["empty"] += not signatures[name]["signature"]
            s["near"] += bool(signatures[name]["near_tie"])
    return stats


def through_the_judge(suite: str) -> dict:
    """On the hidden draw, through the real judge: the names each mistake, correct version and
    other implementation of a mistake gets."""
    from autograder.mistakes import catalogue
    from tests.helpers import judged, named

    tests = importlib.import_module(f"tests.graded.test_{suite}")
    same = getattr(tests, "SAME_MISTAKES", {})
    versions = {**{f"correct:{k}": v for k, v in tests.CORRECT.items()},
                **{f"mistake:{k}": m.source for k, m in catalogue(suite).items()},
                **{f"same:{k}": src for k, (_, src) in same.items()}}
    reports = judged(suite, versions)
    return {"mistakes": {k: named(reports[f"mistake:{k}"]) for k, m in catalogue(suite).items() if m.recognisable},
            "correct_named": sum(bool(named(reports[f"correct:{k}"])) or not reports[f"correct:{k}"]["passed"]
                                 for k in tests.CORRECT),
            "correct": len(tests.CORRECT),
            "same": {k: (m, named(reports[f"same:{k}"])) for k, (m, _) in same.items()}}


def row(label: str, stats: list[dict], draws: int, judged: list[dict], unrecognisable: int) -> str:
    everything = [s for st in stats for s in st.values()]
    n = len(everything)
    cells = [label, str(n + unrecognisable), str(unrecognisable), f"{sum(s['named'] == draws for s in everything)}/{n}",
             f"{sum(s['alone'] == draws for s in everything)}/{n}", str(sum(bool(s["with"]) for s in everything)),
             str(sum(bool(s["empty"]) for s in everything)), str(sum(bool(s["near"]) for s in everything))]
    if judged:
        named = sum(k in names for j in judged for k, names in j["mistakes"].items())
        same = [(m, names) for j in judged for m, names in j["same"].values()]
        cells += [f"{named}/{n}", f"{sum(m in names for m, names in same)}/{len(same)}" if same else "-",
                  f"{sum(j['correct_named'] for j in judged)}/{sum(j['correct'] for j in judged)}"]
    return "| " + " | ".join(cells) + " |"


def main(argv: list[str] | None = None) -> int:
    from autograder.assignments import assignment_of
    from autograder.mistakes import catalogue, catalogue_files

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="suites (default: every catalogue)")
    parser.add_argument("--draws", type=int, default=8, help="draws of the cases, in process")
    parser.add_argument("--judge", action="store_true", help="also through the real judge on the hidden draw")
    parser.add_argument("--per-function", action="store_true", help="a row per graded function too")
    args = parser.parse_args(argv)
    suites = args.names or catalogue_files()
    by_notebook, rows = defaultdict(list), []
    for suite in suites:
        stats = in_process(suite, args.draws)
        judged = through_the_judge(suite) if args.judge else None
        unrecognisable = sum(not m.recognisable for m in catalogue(suite).values())
        by_notebook[assignment_of(suite) or "-"].append((suite, stats, judged, unrecognisable))
        for name, s in stats.items():
            if s["with"] or s["named"] < args.draws:
                print(f"  {suite}/{name}: named on {s['named']} of {args.draws} draws, alone on {s['alone']}; "
                      f"with {sorted(s['with'])}; empty on {s['empty']}; near ties on {s['near']}", flush=True)
    head = ["notebook", "mistakes", "not recognisable", f"named on all {args.draws} draws", "named alone on all",
            "named with another",
            "empty on a draw", "near tie on a draw"]
    head += ["named by the judge", "same mistake, other code, named", "correct versions failed or named"] \
        if args.judge else []
    print("| " + " | ".join(head) + " |\n|" + "---|" * len(head))
    for notebook in sorted(by_notebook):
        entries = by_notebook[notebook]
        if args.per_function:
            for suite, stats, judged, unrecognisable in entries:
                rows.append(row(f"{notebook} `{suite}`", [stats], args.draws, [judged] if judged else [], unrecognisable))
        rows.append(row(notebook, [e[1] for e in entries], args.draws, [e[2] for e in entries if e[2]],
                        sum(e[3] for e in entries)))
    every = [e for entries in by_notebook.values() for e in entries]
    rows.append(row("all", [e[1] for e in every], args.draws, [e[2] for e in every if e[2]], sum(e[3] for e in every)))
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
