"""The class report of a graded assignment: what the class got wrong, per graded function and per hidden case.

    python -m autograder.class_report 07 --course DIR     # = make class-report ASSIGNMENT=07 COURSE=DIR

Reads what `make grade` wrote in DIR/grades/07.json (each row: `mistakes`, the known mistakes the
judge named per graded cell; `failed_cases`, the hidden cases that failed per suite the judge
answered) and the assignment's source notebooks (which graded cell calls which suite), and writes
into DIR/grades/:

- 07_report.md and 07_report.csv: per graded function, how many submissions the judge checked,
  how many passed, how many failed with each known mistake named (a submission may be named more
  than one), with only error cases failing ("errors not raised": the math is right) and otherwise;
  per hidden case, how many checked submissions failed it and the rate;
- 07_report.png: the functions' outcomes and the failure rate of each case some submission failed.

A submission whose hidden check never reached the judge (a crash before the cell, a timeout) is
not counted as checked for that function. This is the instructor's view: it holds the catalogue's
sentences, never a student's name.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from .course_folder import SOLUTIONS


@dataclass
class FunctionTally:
    """One graded function (suite) over the class: outcomes per submission and failures per case."""

    suite: str
    cell: str
    checked: int = 0
    passed: int = 0
    named: Counter = field(default_factory=Counter)  # known mistake -> submissions it was named in
    failed_named: int = 0  # failed with at least one known mistake named
    errors_only: int = 0  # failed on error cases only, none named
    otherwise: int = 0  # failed, no known mistake named
    case_failures: Counter = field(default_factory=Counter)
    cases: list[str] = field(default_factory=list)  # every hidden case name known, in suite order


def case_names(suite: str) -> list[str]:
    """The suite's hidden case names, from the grader's case file when there is one."""
    from .cases import load_cases

    try:
        return [c["name"] for c in load_cases(suite)["cases"]]
    except Exception:  # noqa: BLE001 - no case file here: the names the rows hold will do
        return []


def tally(rows: list[dict], gates: dict) -> list[FunctionTally]:
    """Per (cell, suite) of `gates` ({(notebook, grade id): [suites]}), the class's outcomes."""
    out = []
    for (notebook, cell), suites in sorted(gates.items()):
        for suite in suites:
            t = FunctionTally(suite, f"{notebook}:{cell}", cases=case_names(suite))
            for row in rows:
                failed = row.get("failed_cases", {}).get(suite)
                if failed is None:
                    continue
                t.checked += 1
                t.case_failures.update(failed)
                names = row.get("mistakes", {}).get(t.cell, [])
                if not failed:
                    t.passed += 1
                elif names:
                    t.failed_named += 1
                    t.named.update(names)
                elif row.get("errors_not_raised", {}).get(suite):
                    t.errors_only += 1
                else:
                    t.otherwise += 1
            t.cases += sorted(set(t.case_failures) - set(t.cases))
            out.append(t)
    return out


def sentences(suite: str) -> dict[str, str]:
    from .mistakes import catalogue

    return {name: m.sentence for name, m in catalogue(suite).items()}


def share(n: int, of: int) -> str:
    return f"{n / of:.0%}" if of else "-"


def markdown(assignment: str, tallies: list[FunctionTally], students: int) -> str:
    lines = [f"# Assignment {assignment}: class report", "",
             f"{students} submissions. A submission counts as checked for a function when its hidden check "
             "reached the judge.", "", "## Graded functions", "",
             "| function | checked | passed | failed, known mistake named | failed, errors not raised only "
             "| failed otherwise |", "|---|---|---|---|---|---|"]
    for t in tallies:
        lines.append(f"| `{t.suite}` | {t.checked} | {t.passed} | {t.failed_named} | {t.errors_only} | {t.otherwise} |")
    lines += ["", "## Known mistakes named", "", "| function | mistake | submissions | share of checked | what it is |",
              "|---|---|---|---|---|"]
    for t in tallies:
        said = sentences(t.suite)
        for name, n in t.named.most_common():
            lines.append(f"| `{t.suite}` | `{name}` | {n} | {share(n, t.checked)} | {said.get(name, '')} |")
    lines += ["", "## Hidden cases", "", "| function | case | failed | of checked | rate |", "|---|---|---|---|---|"]
    for t in tallies:
        for case in t.cases:
            n = t.case_failures[case]
            lines.append(f"| `{t.suite}` | `{case}` | {n} | {t.checked} | {share(n, t.checked)} |")
    return "\n".join(lines) + "\n"


def write_csv(path: Path, tallies: list[FunctionTally]) -> None:
    """One row per figure: (table, function, item, count, of)."""
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["table", "function", "item", "count", "of"])
        for t in tallies:
            for item, n in (("passed", t.passed), ("failed, known mistake named", t.failed_named),
                            ("failed, errors not raised only", t.errors_only), ("failed otherwise", t.otherwise)):
                w.writerow(["function", t.suite, item, n, t.checked])
            w.writerows(["mistake", t.suite, name, n, t.checked] for name, n in t.named.most_common())
            w.writerows(["case", t.suite, case, t.case_failures[case], t.checked] for case in t.cases)


def figure(path: Path, assignment: str, tallies: list[FunctionTally]) -> None:
    """Top: each function's checked submissions by outcome, one segment per known mistake named
    (shades of red, in the legend). Bottom: the failure rate of each hidden case some submission
    failed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    failing = [(t, c) for t in tallies for c in t.cases if t.case_failures[c]]
    named = [(t.suite, name) for t in tallies for name in t.named]
    reds = plt.get_cmap("Reds")
    shade = {key: reds(0.45 + 0.5 * i / max(len(named) - 1, 1)) for i, key in enumerate(named)}
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(11, 2.5 + 0.45 * (len(tallies) + len(failing))),
                                      gridspec_kw={"height_ratios": [max(len(tallies), 2), max(len(failing), 1)]})
    for y, t in enumerate(tallies):
        segments = [("passed", t.passed, "tab:green"),
                    *[(f"{t.suite}: {n}", k, shade[(t.suite, n)]) for n, k in t.named.most_common()],
                    ("errors not raised only", t.errors_only, "tab:olive"), ("failed otherwise", t.otherwise, "tab:gray")]
        x = 0.0
        for label, n, color in segments:
            if n:
                top.barh(y, n, left=x, height=0.6, color=color, edgecolor="white", label=label)
                top.text(x + n / 2, y, str(n), ha="center", va="center", fontsize=8)
                x += n
    handles, labels = top.get_legend_handles_labels()
    unique = dict(zip(labels, handles))
    top.legend(unique.values(), unique.keys(), fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))
    top.set_yticks(range(len(tallies)), [t.suite for t in tallies])
    top.set_ylim(len(tallies) - 0.5, -0.5)
    top.set_xlabel("submissions checked")
    top.set_title(f"assignment {assignment}: outcome per graded function (red: a known mistake named)")
    bottom.barh(range(len(failing)), [t.case_failures[c] / t.checked for t, c in failing], color="tab:red")
    bottom.set_yticks(range(len(failing)), [f"{t.suite}: {c}" for t, c in failing], fontsize=7)
    bottom.set_ylim(len(failing) - 0.5, -0.5)  # first case on top, no margin
    bottom.set_xlim(0, 1)
    bottom.set_xlabel("share of checked submissions that failed it")
    bottom.set_title("hidden cases some submission failed (the table lists every case)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def class_report(assignment: str, course: Path, source: Path | None = None) -> list[Path]:
    """Write the report's table (markdown and CSV) and figure; returns their paths."""
    from .assignments import hidden_gates

    grades = Path(course) / "grades" / f"{assignment}.json"
    if not grades.is_file():
        raise SystemExit(f"no {grades}: run `make grade ASSIGNMENT={assignment} COURSE={course}` first")
    try:
        rows = json.loads(grades.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise SystemExit(f"{grades}: not JSON (line {e.lineno}: {e.msg})") from None
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise SystemExit(f"{grades}: expected a list of rows (objects), as `make grade` writes")
    gates = hidden_gates(Path(source or SOLUTIONS) / assignment)
    tallies = tally(rows, gates)
    base = grades.parent / f"{assignment}_report"
    paths = [base.with_suffix(".md"), base.with_suffix(".csv"), base.with_suffix(".png")]
    paths[0].write_text(markdown(assignment, tallies, len(rows)), encoding="utf-8")
    write_csv(paths[1], tallies)
    figure(paths[2], assignment, tallies)
    return paths


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("assignment", help="assignment id, e.g. 07")
    parser.add_argument("--course", type=Path, default=Path("."), help="the course folder `make grade` wrote into")
    parser.add_argument("--source", type=Path, default=None, help="source notebooks folder (default: solutions/)")
    args = parser.parse_args(argv)
    for path in class_report(args.assignment.zfill(2), args.course, args.source):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
