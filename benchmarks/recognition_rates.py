"""Recognition of the known mistakes, measured: per notebook, the share of its graded functions'
catalogued mistakes that the judge names when each is submitted alone, whether a correct version is
ever named, and recognition's precision and recall on mistakes written blind.

    python benchmarks/recognition_rates.py [--draws 8] [--judge] [--per-function] [--verdicts] [NAME ...]
    python benchmarks/recognition_rates.py --blind [--draws 8] [--judge]

On `--draws` draws of every suite's cases (seeds 0 .. N-1, made in this process as the case
generator makes them, each mistake run as the judge runs it: `autograder.signatures`), each
mistake's own outputs are recognised against every mistake's signature; with `--judge`, also every
mistake, correct version and other implementation of a mistake (each grader.py's CORRECT,
SAME_MISTAKES) through the real judge on the hidden draw (autograder/hidden/, made when missing).
A mistake counts as named when recognition names it on every draw, alone when nothing else is
named with it ("not recognisable": those the catalogue marks so, left out of the rates); "together"
counts mistakes named with another on some draw (outputs the draw's cases cannot tell apart: both
names are shown); "no telling case" counts mistakes whose signature was empty on some draw (they
pass every case there, or fail only where their tolerance holds the truth, so nothing names them),
"near ties" those whose tree fell back to their own run on some case. The tests hold the same
rates (tests/test_graded.py: `check_mistake` through the judge, `check_many_draws` on 1 to 4
draws).

`--verdicts` prints how far the mistakes' failing values are from the truth, in tolerances: how
many of their failing cases (wrong values only) the verdict "at rounding scale" covers
(`autograder.compare.ROUNDING_SCALE`), and the nearest ones.

`--blind` recognises each entry of tests/blind_mistakes.py (written by a contributor who had not
read the catalogue) on the draws (and, with `--judge`, through the judge on the hidden draw), and
prints each name given, whether it is true of the entry (tests/test_blind_mistakes.py:
TRUE_NAMES), precision (true names given / names given, over entries and draws) and recall
(entries that have a true name and get one on every draw / entries that have one).
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def in_process(suite: str, draws: int) -> dict:
    """Per mistake over `draws` draws: named every time, alone every time, the others named with
    it, empty or near-tie draws; and whether a correct version failed or was named."""
    from autograder.cases import make_suite_cases
    from autograder.mistakes import catalogue
    from autograder.recognition import names as names_of
    from autograder.recognition import recognise
    from autograder.signatures import draw_signatures, passed_cases
    from autograder.suite_api import load_suite, suite_settings

    module = load_suite(suite)
    settings = suite_settings(module)
    stats = {name: {"named": 0, "alone": 0, "with": set(), "empty": 0, "near": 0, "ratios": []}
             for name, m in catalogue(suite).items() if m.recognisable}
    for seed in range(draws):
        cases = make_suite_cases(suite, seed, mistakes=False)["cases"]
        error_cases = [c["name"] for c in cases if c.get("error_case")]
        signatures, results = draw_signatures(suite, module, cases)
        for name, s in stats.items():
            names = [n for m in recognise(results[name], signatures, settings, error_cases=error_cases,
                                          passed=passed_cases(module, results[name], cases)) for n in names_of(m)]
            s["named"] += name in names
            s["alone"] += names == [name]
            s["with"] |= set(names) - {name}
            s["empty"] += not signatures[name]["signature"]
            s["near"] += bool(signatures[name]["near_tie"])
            s["ratios"] += [(r, seed, case) for case, r in value_ratios(results[name], cases, settings)]
    return stats


def value_ratios(results: dict, cases: list[dict], settings: dict) -> list[tuple[str, float]]:
    """(case, worst error / tolerance) of each case that `results` fail with wrong values only."""
    from autograder.compare import compare

    out = []
    for case in cases:
        got = results[case["name"]]
        if "outputs" not in got:
            continue
        try:
            problems = compare(got["outputs"], case["expected"], settings)
        except Exception:  # noqa: BLE001 - outputs the comparison cannot walk: no value verdict
            continue
        if problems and all(p["what"] == "value" for p in problems):
            out.append((case["name"], max(p["error"] / p["tolerance"] if p["tolerance"] else float("inf")
                                          for p in problems)))
    return out


def verdict_report(every: list[tuple[str, dict]]) -> None:
    """How far the mistakes' failing values are from the truth, in tolerances (`--verdicts`)."""
    from autograder.compare import ROUNDING_SCALE

    ratios = sorted((r, f"{suite}/{name}", seed, case) for suite, stats in every for name, s in stats.items()
                    for r, seed, case in s["ratios"])
    print(f"\n{len(ratios)} failing cases of mistakes with wrong values only; within k tolerances:")
    for k in (1, 2, ROUNDING_SCALE, 10, 100, 1000):
        print(f"  k = {k:g}: {sum(r <= k for r, *_ in ratios)}")
    print("nearest:")
    for r, label, seed, case in ratios[:16]:
        print(f"  {r:8.3g}  {label}  seed {seed}  {case}")


def blind(draws: int, judge: bool) -> int:
    """Precision and recall of recognition on tests/blind_mistakes.py (`--blind`): a name given is a
    mistake with its alternatives, true when one of them is (TRUE_NAMES)."""
    from tests.blind_mistakes import BLIND
    from tests.test_blind_mistakes import TRUE_NAMES, false_names, names_on_draws

    got = names_on_draws(BLIND, range(draws))
    if judge:
        from autograder.recognition import names as names_of
        from tests.helpers import judged

        for suite in sorted({e["function"] for e in BLIND}):
            entries = [e for e in BLIND if e["function"] == suite]
            reports = judged(suite, {e["label"]: e["source"] for e in entries})
            for e in entries:
                report = reports[e["label"]]
                got[e["label"]].append(("judge", not report["passed"], [names_of(m) for m in report.get("mistakes", [])]))
    given = wrong = recalled = having = failing = 0
    for e in BLIND:
        label, truth, runs = e["label"], TRUE_NAMES[e["label"]], got[e["label"]]
        failing += all(failed for _, failed, _ in runs)
        for _, _, groups in runs:
            given += len(groups)
            wrong += len(false_names(label, groups))
        having += bool(truth)
        recalled += bool(truth) and all(any(set(g) & truth for g in groups) for _, _, groups in runs)
        said = sorted({" or ".join(g) for _, _, groups in runs for g in groups})
        marks = [f"{g}{' (FALSE)' if not set(g.split(' or ')) & truth else ''}" for g in said]
        print(f"  {e['function']}/{label}: {', '.join(marks) or 'no name'}; true: {sorted(truth) or 'none'}")
    draws_said = f"{draws} draws" + (" and the judge's hidden draw" if judge else "")
    print(f"\nblind set, {len(BLIND)} entries, {draws_said}: failing on every draw {failing}/{len(BLIND)}; "
          f"names given {given}, false {wrong}: precision {(given - wrong) / given if given else float('nan'):.3f}; "
          f"recall {recalled}/{having} = {recalled / having if having else float('nan'):.3f} "
          f"(entries that have a true name and got one on every draw)")
    return 0


def through_the_judge(suite: str) -> dict:
    """On the hidden draw, through the real judge: the names each mistake, correct version and
    other implementation of a mistake gets."""
    from autograder.mistakes import catalogue
    from autograder.suite_api import load_suite
    from tests.helpers import corpus, judged, named

    tests = load_suite(suite)
    same = getattr(tests, "SAME_MISTAKES", {})
    reports = judged(suite, corpus(suite))
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
    parser.add_argument("--verdicts", action="store_true", help="how far the mistakes' failing values are, in tolerances")
    parser.add_argument("--blind", action="store_true", help="precision and recall on tests/blind_mistakes.py")
    args = parser.parse_args(argv)
    if args.blind:
        return blind(args.draws, args.judge)
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
                      f"with {sorted(s['with'])}; no telling case on {s['empty']}; near ties on {s['near']}", flush=True)
    head = ["notebook", "mistakes", "not recognisable", f"named on all {args.draws} draws", "named alone on all",
            "named with another", "no telling case on a draw", "near tie on a draw"]
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
    if args.verdicts:
        verdict_report([(suite, stats) for entries in by_notebook.values() for suite, stats, *_ in entries])
    return 0


if __name__ == "__main__":
    sys.exit(main())
