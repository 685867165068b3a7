"""The words a student reads about a hidden (or practice) check, from a fixed vocabulary.

A report, as `autograder.trial.run_cases` makes it:

    {"name": suite, "kind": "hidden" | "practice", "passed": bool, "problem": CODE or None,
     "unsandboxed": bool (optional),
     "cases": [{"case": name, "ok": bool, "verdict": "pass" | "rounding" | "far" | "wrong" | "error",
                "error": CODE or None, "problems": [problem dicts of autograder.compare]}],
     "mistakes": [{"name", "sentence"}], "errors_not_raised": [case names]}   (a failing function)

For hidden cases the kernel only ever gets `redact(report)`: per case its name, pass or fail and
the verdict (failed at rounding scale / far off / a wrong structure, naming the output), and a
fixed message for an error. No error figure, no count of differing values, no shape or key that
the student's code chose, no text the student's process wrote: any of those, read over many calls,
would be an oracle for the hidden inputs or outputs. Practice cases are public, so their report
also shows each failure's worst error beside its tolerance.

A failing function's report also names the known mistakes its outputs match
(`autograder.recognition`): one line each, `known mistake NAME: SENTENCE`, in the catalogue's
public words (and `or known mistake OTHER (no case tells it from NAME): SENTENCE` for a mistake
that no case of the draw tells apart from it), else `not a known mistake`; when the named function also fails cases that its named
mistakes pass, a line that something else is wrong too (a missing check named alone would hide a
wrong value); when only error cases fail, `the math is right; these errors are not raised:
CASES`; and for a function that raised NotImplementedError on every case, that it is still a stub
(or calls one) instead. A name says that the function's outputs on the
mistake's cases are the mistake's outputs within tolerance: one more pass/fail of the kind a
case's verdict already is, against a wrong function's outputs instead of the truth's; no value or
figure comes with it.
"""

from __future__ import annotations

from .compare import ROUNDING_SCALE

UNSANDBOXED = ("unsandboxed: bubblewrap is not in use (AUTOGRADER_SANDBOX=0 or not installed), so the stubbed "
               "course_lib is only first on PYTHONPATH and the repository is readable")
# an exception a student's function raised: its name is shown when it is one of these, else "an exception"
SHOWN_EXCEPTIONS = ("ValueError", "TypeError", "RuntimeError", "IndexError", "KeyError", "AttributeError",
                    "NotImplementedError", "AssertionError", "ZeroDivisionError", "NameError")

CASE_ERRORS = {
    "reference": "calls the reference implementation in course_lib (no credit)",
    "unusable": "returned an output that cannot be compared (not tensors, numbers, bools, strings, lists or dicts)",
    "not loaded": "the function could not be loaded in a fresh process (does it use a name defined only in a "
                  "later cell, or an object that cannot be pickled?)",
    "no result": "no result for this case",
}
RUN_PROBLEMS = {
    "timeout": "timed out on the hidden cases",
    "output": "the fresh process running the function wrote more than the output limit",
    "crashed": "the fresh process running the function crashed or was killed (memory?)",
    "processes": "the fresh process running the function started too many processes",
    "budget": "not checked: this hidden check was already answered for this submission (each graded check is "
              "answered once)",
    "assignment": "not checked: this suite does not belong to the assignment being graded",
    "unknown": "not checked: no such hidden-case suite",
    "checker": "the hidden-case checker could not run",
    "malformed": "the fresh process running the function returned results that cannot be read",
}
WHAT = {
    "kind": "is another kind of value than expected",
    "extra keys": "has keys the expected output does not have",
    "length": "has another length than expected",
    "shape": "has another shape than expected",
    "dtype": "has another dtype than the reference's",
    "nan": "has NaN or infinity where the truth does not (or not where it does)",
    "exact": "differs from the expected value (an exact match is needed)",
}
VERDICT = {
    "rounding": f"failed at rounding scale (off by at most {ROUNDING_SCALE:g} times the tolerance: an error of the "
                "size of rounding, e.g. a lower precision, a less stable formula or a tiny wrong term)",
    "far": f"is far from the truth (off by more than {ROUNDING_SCALE:g} times the tolerance: a wrong value)",
}


UNFINISHED = "NotImplementedError on every case: the function is still a stub, or calls one"
# what else a function named for known mistakes gets wrong (`autograder.recognition.besides`)
BESIDES = {"values": "and its values are wrong in another way too: it fails cases that the known mistake(s) above pass",
           "errors": "and it fails error cases that the known mistake(s) above pass (an error not raised, or another "
                     "exception)"}
OR_KNOWN = "or known mistake "  # an alternative no case of the draw tells from the mistake above it
RECOGNITION_LINES = ("known mistake ", OR_KNOWN, "not a known mistake", "the math is right", UNFINISHED,
                     *BESIDES.values())  # for the grades' notes


def error_code(exception: str) -> str:
    """The fixed code of an exception a student's function raised."""
    return f"raised {exception if exception in SHOWN_EXCEPTIONS else 'an exception'}"


def _problem_text(p: dict, numbers: bool) -> str:
    what = p["what"]
    if what.startswith("missing keys:"):
        return f"{p['where']} lacks key(s) {', '.join(repr(k) for k in what.split(':', 1)[1].split(','))}"
    if what == "value":
        what = "rounding" if p["tolerance"] and p["error"] <= ROUNDING_SCALE * p["tolerance"] else "far"
    if what in VERDICT:
        text = f"{p['where']} {VERDICT[what]}"
        if numbers and p.get("error") is not None:
            text += f"; largest error {p['error']:.3g} where the tolerance is {p['tolerance']:.3g}"
        return text
    return f"{p['where']} {WHAT.get(what, 'is wrong')}"


def redact(report: dict) -> dict:
    """What a kernel may receive about hidden cases (see the module docstring)."""
    cases = []
    for c in report.get("cases", []):
        problems = []
        for p in c.get("problems", []):
            what = p["what"]
            if what == "value":  # only on which side of the rounding scale it fell
                what = "rounding" if p["tolerance"] and p["error"] <= ROUNDING_SCALE * p["tolerance"] else "far"
            problems.append({"where": p["where"], "what": what})
        cases.append({"case": c["case"], "ok": bool(c["ok"]), "verdict": c.get("verdict"), "error": c.get("error"),
                      "problems": problems[:3]})
    out = {"name": report["name"], "kind": report.get("kind", "hidden"), "passed": bool(report.get("passed")),
           "problem": report.get("problem"), "cases": cases}
    if "mistakes" in report:  # the catalogue's public names and sentences, and public case names
        out["mistakes"] = [{"name": str(m["name"]), "sentence": str(m["sentence"]),
                            **({"or": [{"name": str(a["name"]), "sentence": str(a["sentence"])} for a in m["or"]]}
                               if m.get("or") else {})} for m in report["mistakes"]]
        out["errors_not_raised"] = [str(name) for name in report.get("errors_not_raised", [])]
        out["unfinished"] = bool(report.get("unfinished"))
        out["besides"] = report.get("besides") if report.get("besides") in BESIDES else ""
    if report.get("unsandboxed"):
        out["unsandboxed"] = True
    return out


def format_report(report: dict, numbers: bool | None = None) -> str:
    """The report as lines of text; `numbers` (default: for practice reports only) adds each
    failure's worst error and tolerance."""
    numbers = report.get("kind") == "practice" if numbers is None else numbers
    cases = report.get("cases", [])
    n_ok = sum(c["ok"] for c in cases)
    lines = [f"{report['name']}: {n_ok}/{len(cases)} {report.get('kind', 'hidden')} cases passed"]
    if report.get("unsandboxed"):
        lines.append(f"  ({UNSANDBOXED})")
    if report.get("problem"):  # a fixed message; a practice run's own reason (the student's notebook) as it is
        problem = report["problem"]
        lines.append(f"  {RUN_PROBLEMS.get(problem, problem if report.get('kind') == 'practice' else 'the check could not run')}")
    for c in cases:
        if c["ok"]:
            continue
        if c.get("error"):
            why = [CASE_ERRORS.get(c["error"], c["error"] if c["error"].startswith("raised ") else "failed")]
        else:
            why = [_problem_text(p, numbers) for p in c.get("problems", [])[:3]]
        lines.append(f"  FAIL {c['case']}: " + "; ".join(why))
    return "\n".join(lines + mistake_lines(report))


def mistake_lines(report: dict) -> list[str]:
    """What recognition found in a failing function (`autograder.recognition`): a line per known
    mistake (and one more when it fails cases they pass), the math-is-right line, or "not a known
    mistake"; nothing for a report without it."""
    if "mistakes" not in report:
        return []
    lines = []
    for m in report["mistakes"]:
        lines.append(f"  known mistake {m['name']}: {m['sentence']}")
        lines += [f"  {OR_KNOWN}{a['name']} (no case tells it from {m['name']}): {a['sentence']}" for a in m.get("or", [])]
    if report.get("besides") in BESIDES and lines:
        lines.append(f"  {BESIDES[report['besides']]}")
    if report.get("errors_not_raised"):
        lines.append(f"  the math is right; these errors are not raised: {', '.join(report['errors_not_raised'])}")
    if report.get("unfinished"):
        lines.append(f"  {UNFINISHED}")
    return lines or ["  not a known mistake"]
