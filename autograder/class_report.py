"""The class report of a graded assignment: what the class got wrong, per graded function and per hidden case.

    python -m autograder.class_report 07 --course DIR     # = make class-report ASSIGNMENT=07 COURSE=DIR

Reads what `make grade` wrote in DIR/grades/07.json (each row: `failed_cases`, the hidden cases that
failed per suite the judge answered; `recognition`, per suite, the known mistakes the judge named,
whether the function was still a stub and whether a named function fails other cases too;
`errors_not_raised`) and the assignment's source notebooks (which graded cell calls which suite),
and writes into DIR/grades/:

- 07_report.md and 07_report.csv: per graded function, the submissions the judge checked, and of
  them one outcome each (`OUTCOMES`); the known mistakes named; per hidden case, how many of the
  attempts failed it;
- 07_report.png: the outcomes per function, and the hidden cases that tell the attempts apart.

**Not attempted** is a function that raised NotImplementedError on every case: the release's stub,
or a function that calls one. It is no wrong attempt: it is counted apart, and the case rates are
taken over the attempts only.

**A helper failed** is a function that failed, with no known mistake of its own named, in a
submission where a graded function it builds on failed too: one its reference in `course_lib`
calls (directly or through another), graded in the same assignment (a student's own version runs
in the judge, so a wrong helper fails its callers). Its failures may all come from the helper;
the report does not claim they do, and it does not count them as the function's own mistakes.

A submission whose hidden check never reached the judge (a crash before the cell, a timeout) is
not counted as checked for that function. This is the instructor's view: it holds the catalogue's
sentences, never a student's name.
"""

from __future__ import annotations

import argparse
import ast
import csv
import inspect
import json
import sys
import textwrap
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from .course_folder import SOLUTIONS

# a checked submission's outcome for one function, in the order it is decided, with its colour
OUTCOMES = {
    "passed": ("passed", "#2e7d32"),
    "not attempted": ("not attempted (a stub)", "#d9d9d9"),
    "named": ("known mistake named", "#c62828"),
    "errors only": ("errors not raised only", "#9e9d24"),
    "helper": ("a helper it calls failed", "#ef8f00"),
    "otherwise": ("failed otherwise", "#616161"),
}
FAILED = ("named", "errors only", "helper", "otherwise")
MAX_CASE_BARS = 40  # the figure's case panel at most; the table lists every case


@dataclass
class FunctionTally:
    """One graded function (suite) over the class: outcomes per submission and failures per case."""

    suite: str
    cell: str
    helpers: list[str] = field(default_factory=list)  # graded suites of the assignment it builds on
    outcomes: Counter = field(default_factory=Counter)  # outcome -> submissions
    named: Counter = field(default_factory=Counter)  # known mistake -> submissions it was named in
    named_and_more: int = 0  # named, and failing cases its named mistakes pass
    cases: list[str] = field(default_factory=list)  # every hidden case name known, in suite order
    failing: dict = field(default_factory=dict)  # case -> [outcome of each attempt that failed it]
    failing_rows: dict = field(default_factory=dict)  # case -> frozenset of the row numbers that failed it

    @property
    def checked(self) -> int:
        return sum(self.outcomes.values())

    @property
    def attempts(self) -> int:
        return self.checked - self.outcomes["not attempted"]


def case_names(suite: str) -> list[str]:
    """The suite's hidden case names, from the grader's case file when there is one."""
    from .cases import load_cases

    try:
        return [c["name"] for c in load_cases(suite)["cases"]]
    except Exception:  # noqa: BLE001 - no case file here: the names the rows hold will do
        return []


def called_names(name: str) -> set[str]:
    """The names the source of course_lib's `name` refers to (empty when it has no source)."""
    import course_lib

    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(getattr(course_lib, name))))
    except (AttributeError, OSError, TypeError, SyntaxError):
        return set()
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} | \
        {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}


def helpers_of(suites: list[str]) -> dict[str, list[str]]:
    """{suite: the other suites of `suites` whose graded function its reference calls, directly or
    through another of them}."""
    from .suite_api import load_suite

    graded = {s: load_suite(s).GRADED for s in suites}
    direct = {s: {t for t in suites if t != s and graded[t] in called_names(graded[s])} for s in suites}
    out = {}
    for s in suites:
        seen, todo = set(), list(direct[s])
        while todo:
            t = todo.pop()
            if t not in seen and t != s:
                seen.add(t)
                todo += direct[t]
        out[s] = sorted(seen)
    return out


def _recognition(row: dict, suite: str, cell: str) -> dict:
    """The judge's recognition of `suite` in a row; a row of an older grades file has the names per cell."""
    found = row.get("recognition", {}).get(suite)
    if found is not None:
        return found
    return {"mistakes": row.get("mistakes", {}).get(cell, []), "unfinished": False, "besides": ""}


def outcome(row: dict, suite: str, cell: str, helpers: list[str]) -> str | None:
    """The outcome of `suite` in one row (a key of OUTCOMES), None when its check never reached the judge."""
    failed = row.get("failed_cases", {}).get(suite)
    if failed is None:
        return None
    found = _recognition(row, suite, cell)
    if not failed:
        return "passed"
    if found.get("unfinished"):
        return "not attempted"
    if found.get("mistakes"):
        return "named"
    if row.get("errors_not_raised", {}).get(suite):
        return "errors only"
    if any(row.get("failed_cases", {}).get(h) for h in helpers):
        return "helper"
    return "otherwise"


def tally(rows: list[dict], gates: dict) -> list[FunctionTally]:
    """Per (cell, suite) of `gates` ({(notebook, grade id): [suites]}), the class's outcomes."""
    every = [s for suites in gates.values() for s in suites]
    helpers = helpers_of(sorted(set(every)))
    out = []
    for (notebook, cell), suites in sorted(gates.items()):
        for suite in suites:
            t = FunctionTally(suite, f"{notebook}:{cell}", helpers=helpers[suite], cases=case_names(suite))
            for i, row in enumerate(rows):
                what = outcome(row, suite, t.cell, t.helpers)
                if what is None:
                    continue
                t.outcomes[what] += 1
                if what == "named":
                    found = _recognition(row, suite, t.cell)
                    t.named.update(found["mistakes"])
                    t.named_and_more += bool(found.get("besides"))
                if what in FAILED:
                    for case in row["failed_cases"][suite]:
                        t.failing.setdefault(case, []).append(what)
                        t.failing_rows[case] = t.failing_rows.get(case, frozenset()) | {i}
            t.cases += sorted(set(t.failing) - set(t.cases))
            out.append(t)
    return out


def sentences(suite: str) -> dict[str, str]:
    from .mistakes import catalogue

    return {name: m.sentence for name, m in catalogue(suite).items()}


def share(n: int, of: int) -> str:
    return f"{n / of:.0%}" if of else "-"


def markdown(assignment: str, tallies: list[FunctionTally], students: int) -> str:
    helpers = {t.suite: t.helpers for t in tallies if t.helpers}
    lines = [f"# Assignment {assignment}: class report", "",
             f"{students} submissions. A submission counts as checked for a function when its hidden check "
             "reached the judge; each checked submission has one outcome per function. *Not attempted*: "
             "NotImplementedError on every case (the release's stub, or a function that calls one), counted apart "
             "from the attempts. *Known mistake named*: the judge named a catalogued mistake of the function "
             "(\"and more\": it also fails cases those mistakes pass). *A helper it calls failed*: no mistake of its "
             "own named, and a graded function its reference builds on failed in the same submission, so its "
             "failures may come from the helper.", ""]
    if helpers:
        lines += ["Helpers (the graded functions each reference calls): "
                  + "; ".join(f"`{s}`: " + ", ".join(f"`{h}`" for h in hs) for s, hs in helpers.items()) + ".", ""]
    lines += ["## Graded functions", "",
              "| function | checked | passed | not attempted | known mistake named (and more) | errors not raised only "
              "| a helper it calls failed | failed otherwise |", "|---|---|---|---|---|---|---|---|"]
    for t in tallies:
        o = t.outcomes
        lines.append(f"| `{t.suite}` | {t.checked} | {o['passed']} | {o['not attempted']} | {o['named']} "
                     f"({t.named_and_more}) | {o['errors only']} | {o['helper']} | {o['otherwise']} |")
    lines += ["", "## Known mistakes named", "", "| function | mistake | submissions | share of attempts | what it is |",
              "|---|---|---|---|---|"]
    for t in tallies:
        said = sentences(t.suite)
        for name, n in t.named.most_common():  # "a or b": alternatives no case told apart
            what = " / ".join(said.get(part, "") for part in name.split(" or "))
            lines.append(f"| `{t.suite}` | `{name}` | {n} | {share(n, t.attempts)} | {what} |")
    lines += ["", "## Hidden cases", "", "Failures among the attempts (checked, not a stub), by the outcome of the "
              "submission that failed the case.", "",
              "| function | case | failed | of attempts | rate | known mistake named | a helper failed | otherwise |",
              "|---|---|---|---|---|---|---|---|"]
    for t in tallies:
        for case in t.cases:
            by = Counter(t.failing.get(case, []))
            n = sum(by.values())
            lines.append(f"| `{t.suite}` | `{case}` | {n} | {t.attempts} | {share(n, t.attempts)} | {by['named']} "
                         f"| {by['helper']} | {by['otherwise'] + by['errors only']} |")
    return "\n".join(lines) + "\n"


def write_csv(path: Path, tallies: list[FunctionTally]) -> None:
    """One row per figure: (table, function, item, count, of)."""
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["table", "function", "item", "count", "of"])
        for t in tallies:
            w.writerows(["function", t.suite, OUTCOMES[k][0], t.outcomes[k], t.checked] for k in OUTCOMES)
            w.writerow(["function", t.suite, "known mistake named, and more", t.named_and_more, t.checked])
            w.writerows(["mistake", t.suite, name, n, t.attempts] for name, n in t.named.most_common())
            w.writerows(["case", t.suite, case, len(t.failing.get(case, [])), t.attempts] for case in t.cases)


def telling_cases(t: FunctionTally) -> list[tuple[str, int]]:
    """(case, how many more cases the same attempts failed) for each case that tells the attempts
    apart (some failed it, some passed it), one per set of attempts that failed it, in suite order."""
    groups: dict[frozenset, list[str]] = {}
    for case in t.cases:
        rows = t.failing_rows.get(case, frozenset())
        if 0 < len(rows) < t.attempts:
            groups.setdefault(rows, []).append(case)
    return [(cases[0], len(cases) - 1) for cases in groups.values()]


def figure(path: Path, assignment: str, tallies: list[FunctionTally]) -> None:
    """Top: each function's checked submissions by outcome (shares, one colour per outcome, the
    count in each segment). Below: grouped by function, the failure rate among the attempts of each
    case that tells them apart (a case failed by exactly the same attempts as an earlier one is shown
    once, "+N alike"), each bar split by the outcome of the submissions that failed it, in the same
    colours. At most MAX_CASE_BARS cases, the most failed; the table lists every case."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    bars = [(t, case, alike) for t in tallies for case, alike in telling_cases(t)]
    dropped = max(len(bars) - MAX_CASE_BARS, 0)
    if dropped:
        kept = set(sorted(range(len(bars)), key=lambda i: -len(bars[i][0].failing[bars[i][1]]))[:MAX_CASE_BARS])
        bars = [b for i, b in enumerate(bars) if i in kept]
    rows: list[tuple[str, FunctionTally | None, str | None]] = []  # a heading per function, then its cases
    for t in tallies:
        mine = [(case, alike) for u, case, alike in bars if u is t]
        if mine:
            rows.append((t.suite, None, None))
            rows += [(case + (f" (+{alike} alike)" if alike else ""), t, case) for case, alike in mine]
    top_h, bottom_h = 0.9 + 0.38 * len(tallies), 0.9 + 0.22 * max(len(rows), 2)
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(11, top_h + bottom_h),
                                      gridspec_kw={"height_ratios": [top_h, bottom_h]})
    for y, t in enumerate(tallies):
        x = 0.0
        for key, (label, color) in OUTCOMES.items():
            n = t.outcomes[key]
            if n and t.checked:
                top.barh(y, n / t.checked, left=x, height=0.7, color=color, edgecolor="white", label=label)
                top.text(x + n / t.checked / 2, y, str(n), ha="center", va="center", fontsize=8,
                         color="black" if key == "not attempted" else "white")
                x += n / t.checked
    top.set_yticks(range(len(tallies)), [f"{t.suite} ({t.checked})" for t in tallies], fontsize=8)
    top.set_ylim(len(tallies) - 0.5, -0.5)
    top.set_xlim(0, 1)
    top.set_xlabel("share of the checked submissions (their number in brackets; the count in each segment)", fontsize=8)
    handles = [plt.Rectangle((0, 0), 1, 1, color=color) for _, color in OUTCOMES.values()]
    top.legend(handles, [label for label, _ in OUTCOMES.values()], fontsize=8, ncol=len(OUTCOMES), frameon=False,
               loc="lower center", bbox_to_anchor=(0.5, 1.0), handlelength=1.2, columnspacing=1.0)
    fig.suptitle(f"assignment {assignment}: outcome per graded function, and the hidden cases that tell attempts apart",
                 fontsize=10)
    labels = []
    for y, (label, t, case) in enumerate(rows):
        if t is None:
            labels.append(label)
            bottom.axhline(y, color="#bbbbbb", linewidth=0.5)
            continue
        labels.append(label)
        by = Counter(t.failing[case])
        x = 0.0
        for key in FAILED:
            if by[key]:
                bottom.barh(y, by[key] / t.attempts, left=x, height=0.7, color=OUTCOMES[key][1], edgecolor="white")
                x += by[key] / t.attempts
        bottom.text(x + 0.01, y, f"{len(t.failing[case])}/{t.attempts}", va="center", fontsize=7)
    bottom.set_yticks(range(len(rows)), labels, fontsize=7)
    for tick, (_, t, _) in zip(bottom.get_yticklabels(), rows):
        if t is None:
            tick.set_fontweight("bold")
            tick.set_fontsize(8)
    bottom.set_ylim(max(len(rows), 1) - 0.5, -0.5)
    bottom.set_xlim(0, 1)
    more = f" ({dropped} more in the table)" if dropped else ""
    bottom.set_xlabel("share of the attempts (not stubs) that failed the case, split by their outcome" + more,
                      fontsize=8)
    if not rows:
        bottom.text(0.5, 0.5, "no case tells the attempts apart", ha="center", va="center", fontsize=9)
        bottom.set_yticks([])
    fig.tight_layout()
    fig.savefig(path, dpi=100)
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
