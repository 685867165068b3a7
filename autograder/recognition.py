"""Recognition: which known mistakes a failing function makes, and whether only its errors are missing.

The judge (and `make check`) call `recognise` with a failing function's results on the cases, once
they are compared (`autograder.trial`). Each mistake of the suite's catalogue comes with its
signature on these very cases (`autograder.signatures`: the cases it fails, and there its outputs
as an expected tree, or its error code). A mistake is named when the function's result on every
case of the signature matches it: the same error code, or outputs within the tree's tolerance
(`autograder.compare.compare`, as against the truth). A function that passes every case is never
compared, so a correct function is never named; a mistake whose signature is empty on a draw is
never named on it.

`errors_not_raised` says when every failing case of a function is an error case (the contract asks
for an error there) while every other case passes: the math is right and only errors are missing.

What a student reads of it (`autograder.report`): the names and sentences of the matched mistakes
(public words of the catalogue), or "not a known mistake", and the names of the error cases; never
an expected value or an error figure.
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


def recognise(seen: dict[str, dict], signatures: dict[str, dict], settings: dict, *,
              error_cases=()) -> list[dict]:
    """[{"name", "sentence"}] of the mistakes whose whole signature `seen` matches; `seen` maps a
    case name to the function's result there: {"outputs": plain outputs} or {"error": its code}.
    A function that is still the unfinished stub (`unfinished`) gets no name, whatever a mistake's
    errors: on a suite's error cases its NotImplementedError is "another exception", as a mistake's
    KeyError is."""
    if unfinished(seen, error_cases=error_cases):
        return []
    named = []
    for name, entry in (signatures or {}).items():
        signature = entry.get("signature") or {}
        if signature and all(_matches(seen.get(case), want, settings) for case, want in signature.items()):
            named.append({"name": name, "sentence": entry.get("sentence", "")})
    return named


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
