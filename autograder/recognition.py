"""Recognition: which known mistakes a failing function makes, and whether only its errors are missing.

The judge (and `make check`) call `recognise` with a failing function's results on the cases, once
they are compared (`autograder.trial`). Each mistake of the suite's catalogue comes with its
signature on these very cases (`autograder.signatures`: the cases it fails that tell it from a
correct function, and there its outputs as an expected tree, or its error code). A mistake is
named when the function's result on every case of the signature matches it: outputs within the
tree's tolerance (`autograder.compare.compare`, as against the truth), or the same error code. A
function that passes every case is never compared, so a correct function is never named; a
mistake whose signature is empty on a draw is never named on it; nor is the release's stub.

An error code alone says only which class of exception was raised, and many faults raise a
RuntimeError. So a mistake whose signature holds an error is named only when that error is its
own on the draw (`own_error`): the mistake returns outputs on some case that does not ask for an
error, and on every case where it returns the function behaves as it does (passes where it
passes, matches it where it fails): the error is raised on the mistake's own cases and nowhere
else, by a function that is otherwise the mistake. A mistake that raises on every case (a loss
without a graph fails every backward pass) could never be named so: any function that crashes
everywhere would match it; the catalogue marks such mistakes not recognisable.

Two mistakes may both match: one whose outputs fail every case the other fails, in the same way,
and more ("covers" it: an assert that raises AssertionError for every bad argument also matches
the mistake that checks none of them). Only the one that explains more is named. Two that no case
of the draw tells apart (each covers the other: `log(sigmoid(x))` and `log1p(exp(-x))`, both
infinite at the same margins) are named as alternatives, one entry: the function makes one of
them, and the report says that no case tells which.

`besides` says when a named function fails a case that no named mistake explains (outside their
signatures, and not matching their outputs on the cases they fail untold): its values are wrong
in another way too, which the report says beside the names (a missing check of beta named alone
would hide a wrong loss). `errors_not_raised` says when every failing case of a function is an
error case (the contract asks for an error there) while every other case passes: the math is
right and only errors are missing.

What a student reads of it (`autograder.report`): the names and sentences of the matched mistakes
(public words of the catalogue), or "not a known mistake", whether something else is wrong too,
and the names of the error cases; never an expected value or an error figure.
"""

from __future__ import annotations

from .compare import compare


def _matches(seen: dict | None, want: dict, settings: dict) -> bool:
    if seen is None:
        return False
    if "error" in want:
        return seen.get("error") == want["error"]
    if "outputs" not in seen:
        return False
    try:
        return not compare(seen["outputs"], want["expected"], settings)
    except Exception:  # noqa: BLE001 - outputs of another shape than the mistake's: no match
        return False


STUB = "raised NotImplementedError"  # what the release's stub of a graded function raises, on every case


def own_error(seen: dict[str, dict], entry: dict, settings: dict, *, error_cases=(), passed=()) -> bool:
    """Whether a mistake's errors are its own for `seen` (see the module docstring): it returned
    outputs on a case outside `error_cases`, and on every case it returned on the function behaves as
    it does: passes where it passes (`passed`: the cases the function passes), matches its outputs
    where it fails (its signature, or its untold cases)."""
    returned = entry.get("returned") or []
    errors, passed = set(error_cases), set(passed)
    if not any(case not in errors for case in returned):
        return False
    signature, untold = entry.get("signature") or {}, entry.get("untold") or {}
    for case in returned:
        if case in signature:
            continue  # matched with the rest of the signature
        if not (_matches(seen.get(case), untold[case], settings) if case in untold else case in passed):
            return False
    return True


def matching(seen: dict[str, dict], signatures: dict[str, dict], settings: dict, *, error_cases=(),
             passed=()) -> list[str]:
    """The names of the mistakes whose whole signature `seen` matches (an error only where it is the
    mistake's own: `own_error`), in catalogue order; `seen` maps a case name to the function's
    result there: {"outputs": plain outputs} or {"error": its code}; `passed`: the cases it passes."""
    out = []
    for name, entry in (signatures or {}).items():
        signature = entry.get("signature") or {}
        if not signature or not all(_matches(seen.get(case), want, settings) for case, want in signature.items()):
            continue
        if any("error" in want for want in signature.values()) and \
                not own_error(seen, entry, settings, error_cases=error_cases, passed=passed):
            continue
        out.append(name)
    return out


def recognise(seen: dict[str, dict], signatures: dict[str, dict], settings: dict, *,
              error_cases=(), passed=()) -> list[dict]:
    """[{"name", "sentence", "or": [{"name", "sentence"}]}] of the mistakes `seen` makes
    (`matching`), the release's stub excepted (`unfinished`: on a suite's error cases its
    NotImplementedError is "another exception", as a mistake's KeyError is). Of two matched
    mistakes where one's own outputs match the other's whole signature and not the reverse (it
    "covers" it on this draw: `autograder.signatures`), only the one that explains more is named;
    two that cover each other (no case of the draw tells them apart) are one entry, the second an
    alternative ("or")."""
    if unfinished(seen, error_cases=error_cases):
        return []
    matched = matching(seen, signatures, settings, error_cases=error_cases, passed=passed)

    def covers(a: str, b: str) -> bool:
        return b in (signatures[a].get("covers") or [])

    kept = [b for b in matched if not any(a != b and covers(a, b) and not covers(b, a) for a in matched)]
    named, placed = [], set()
    for name in kept:
        if name in placed:
            continue
        twins = [other for other in kept if other != name and other not in placed and covers(name, other)
                 and covers(other, name)]
        placed |= {name, *twins}
        named.append({"name": name, "sentence": signatures[name].get("sentence", ""),
                      **({"or": [{"name": t, "sentence": signatures[t].get("sentence", "")} for t in twins]}
                         if twins else {})})
    return named


def names(entry: dict) -> list[str]:
    """The names one entry of `recognise` gives: the mistake and its alternatives."""
    return [entry["name"], *(alt["name"] for alt in entry.get("or", []))]


def label(entry: dict) -> str:
    """One entry of `recognise` as one string: "name", or "name or other" for alternatives."""
    return " or ".join(names(entry))


def besides(seen: dict[str, dict], failed: list[str], named: list[dict], signatures: dict[str, dict],
            settings: dict, *, error_cases=()) -> str:
    """What a function named for `named` mistakes gets wrong besides them: "values" when it fails
    (`failed`: case names) a case outside `error_cases` that none of them explains (outside every
    named mistake's signature, and not within tolerance of a named mistake's outputs where that
    mistake fails untold: `autograder.signatures`), else "errors" when such a case is an error case,
    else ""."""
    if not named:
        return ""
    entries = [signatures.get(n) or {} for m in named for n in names(m)]

    def explained(case: str) -> bool:
        return any(case in (e.get("signature") or {}) or
                   (case in (e.get("untold") or {}) and _matches(seen.get(case), e["untold"][case], settings))
                   for e in entries)

    left = [case for case in failed if not explained(case)]
    errors = set(error_cases)
    if any(case not in errors for case in left):
        return "values"
    return "errors" if left else ""


def unfinished(seen: dict[str, dict], *, error_cases=()) -> bool:
    """Whether the function raised NotImplementedError on every case but the suite's `error_cases`
    (names; a suite records there which exception was raised, as an output): a stub, its own or
    one it calls."""
    errors = set(error_cases)
    math = [s for case, s in seen.items() if case not in errors]
    return bool(math) and all(s.get("error") == STUB for s in math)


def errors_not_raised(entries: list[dict], cases: list[dict]) -> list[str]:
    """The failed error cases, when they are all a function fails and it passes at least one other
    case; else []. `entries` are the report's per-case entries, `cases` the cases (their
    "error_case" flag)."""
    error_case = {c["name"]: bool(c.get("error_case")) for c in cases}
    failed = [e["case"] for e in entries if not e["ok"]]
    passed_math = any(e["ok"] and not error_case.get(e["case"]) for e in entries)
    if failed and passed_math and all(error_case.get(name) for name in failed):
        return failed
    return []
