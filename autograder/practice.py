"""Practice cases: run your graded functions of a notebook before you submit, as the grader will.

    make check NB=02                          # in the student kit or in the repository
    python -m autograder.practice 02 [--notebook PATH] [--seed N]

Your functions are taken from your notebook (`notebooks/NN/*.ipynb`: its graded cells and the
cells before them that only define things, as `course_lib.selfcheck.your_functions` does) and
run, each in a fresh process, on practice cases of the very kinds the hidden cases have: the
same suites, drawn with a public seed instead of the grader's secret one, with expected values
made as the hidden ones are (the float64 truth, a tolerance measured on each case). The report
has the judge's format and, the cases being public, each failure's largest error beside its
tolerance; a failing function is also compared with the known mistakes of its catalogue (their
outputs on these cases: `autograder.recognition`), and the report names the ones it makes. Only
the draws differ from grading, so a hidden failure is never a surprise about the contract.

In a student kit the practice cases are files (`practice/NN/<suite>.pt`, made when the kit was
built: the only place expected values live there, beside the known mistakes' outputs on the same
public inputs, their names and sentences, never their code) and each suite is its harness alone
(`autograder/graded/<suite>/__init__.py`: how a function is called, without how hidden inputs are
drawn). In the repository they are generated from `autograder/graded/` and `course_lib` into
`build/cases/` (git-ignored: `autograder.cases.seeded_cases`), and your function runs where the
references of the open assignments are stubs, as when graded.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .suite_api import PRACTICE_SEED

ROOT = Path(__file__).resolve().parent.parent
PRACTICE = ROOT / "practice"  # a student kit's practice cases


def in_kit() -> bool:
    return (PRACTICE / "manifest.json").is_file()


def manifest() -> dict:
    """{"NN": {"suites": {suite: graded function name}}} of the kit, or of the repository's solutions."""
    if in_kit():
        return json.loads((PRACTICE / "manifest.json").read_text(encoding="utf-8"))
    from .assignments import hidden_gates
    from .suite_api import load_suite

    out = {}
    for folder in sorted((ROOT / "solutions").glob("[0-9][0-9]")):
        names = sorted({n for ns in hidden_gates(folder).values() for n in ns})
        out[folder.name] = {"suites": {n: load_suite(n).GRADED for n in names}}
    return out


def practice_cases(suite: str, assignment: str, seed: int = PRACTICE_SEED) -> dict:
    """The practice cases of one suite ({"cases", "mistakes": the known mistakes' signatures on
    them}): the kit's file, or generated (and cached) in the repository."""
    import torch

    if in_kit():
        return torch.load(PRACTICE / assignment / f"{suite}.pt", weights_only=False)
    from .cases import seeded_cases

    return seeded_cases(suite, seed)


def student_functions(assignment: str, notebook: Path | None = None) -> tuple[dict, set[str], str | None]:
    """(namespace, unfinished names, why it failed) of the student's notebook of `assignment`."""
    from course_lib.selfcheck import _notebook_definitions

    if notebook is None:
        found = sorted((ROOT / "notebooks" / assignment).glob("*.ipynb"))
        if not found:
            return {}, set(), f"no notebook in notebooks/{assignment}/"
        notebook = found[0]
    try:
        namespace, unfinished = _notebook_definitions(notebook)
    except Exception as e:  # noqa: BLE001 - the student's notebook, whatever it holds
        return {}, set(), f"{Path(notebook).name} failed to run ({type(e).__name__}: {e})"
    return namespace, unfinished, None


def check(assignment: str, notebook: Path | None = None, seed: int = PRACTICE_SEED) -> list[dict]:
    """Run every graded function of the notebook on its practice cases; the judge's reports."""
    import cloudpickle

    from .suite_api import HARNESSES, SUITES, load_suite, suite_settings
    from .trial import run_cases

    suites = manifest().get(assignment, {}).get("suites", {})
    if not suites:
        raise SystemExit(f"no graded notebook {assignment!r} here (known: {', '.join(manifest()) or 'none'})")
    namespace, unfinished, why = student_functions(assignment, notebook)
    package = HARNESSES if in_kit() else SUITES
    reports = []
    for suite, graded in suites.items():
        report = {"name": suite, "kind": "practice", "cases": [], "passed": False}
        if why or graded not in namespace or graded in unfinished:
            if why or graded not in namespace:
                report["problem"] = why or f"{graded} is not defined in your notebook"
            else:
                report["problem"] = (f"{graded} is still the NotImplementedError stub: write it in its cell, save the "
                                     f"notebook and run this again")
            report["not_run"] = len(practice_cases(suite, assignment, seed)["cases"])  # none of them passed
        else:
            settings = suite_settings(load_suite(suite, package))
            fn_bytes = cloudpickle.dumps(namespace[graded])
            data = practice_cases(suite, assignment, seed)
            cases, mistakes = data["cases"], data.get("mistakes")
            if in_kit():  # the kit's course_lib is already the stubbed one
                report = run_cases(suite, fn_bytes, cases, settings, package=package, sandbox=False, root=ROOT,
                                   kind="practice", mistakes=mistakes)
            else:
                from .stubs import stub_for_suite

                report = run_cases(suite, fn_bytes, cases, settings, package=package, kind="practice",
                                   course_lib=stub_for_suite(suite, assignment), mistakes=mistakes)
        reports.append(report)
    return reports


def main(argv: list[str] | None = None) -> int:
    from .report import format_report

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("assignment", nargs="?", help="the notebook, e.g. 02")
    parser.add_argument("--notebook", type=Path, default=None, help="the notebook file (default: notebooks/NN/*.ipynb)")
    parser.add_argument("--seed", type=int, default=PRACTICE_SEED,
                        help="another draw of practice cases (repository only; a kit has its seed's files)")
    args = parser.parse_args(argv)
    if not args.assignment:
        parser.error(f"which notebook? e.g. make check NB=02 (graded notebooks here: {', '.join(manifest())})")
    assignment = args.assignment.zfill(2)
    if in_kit() and args.seed != PRACTICE_SEED:
        parser.error("a student kit holds the practice cases of one seed only")
    reports = check(assignment, args.notebook, args.seed)
    print(f"notebook {assignment}: practice cases (public seed {args.seed}; the grader's hidden cases are other "
          f"draws of the same kinds)")
    for report in reports:
        if "not_run" in report:  # the function never ran: none of its practice cases passed
            print(f"{report['name']}: 0/{report['not_run']} practice cases passed\n  {report['problem']}")
        else:
            print(format_report(report))
    passed = sum(r["passed"] for r in reports)
    print(f"{passed} of {len(reports)} graded functions pass all their practice cases")
    return 0 if passed == len(reports) else 1


if __name__ == "__main__":
    sys.exit(main())
