"""The docstring of every graded function is its whole contract: every error a hidden case checks is
named in its `Raises:` section.

A student reads the docstring (the stub keeps it), not always the markdown around it. So each
suite maps its error cases to the phrase of the reference's `Raises:` section that states them
(`RAISES = {case name: phrase}`), and this module holds the map to the cases: it draws every
suite's cases with a fixed seed, runs the reference on them, and finds the error cases by their
outputs, in each convention the suites use:

- {"raises": "ValueError"}: the suite caught the exception and names its class (None: no error);
- {"raises_value_error": True}, or a list of such flags, one per input of the case.

Then (1) every error case has an entry, (2) every entry is an error case, (3) its phrase is in
the `Raises:` entry of the exception class the case expects ("ValueError: <when>"). An error case
added without its phrase fails here, and so does an entry whose case was renamed or removed.
"""

from __future__ import annotations

import inspect
import re
import types

import pytest
import torch

import course_lib
from autograder.suite_api import load_suite, run_case, suite_names

SEED = 0
ENTRY = re.compile(r"^(\w+): (.+)$")  # "ValueError: when it is raised", one line each


def raises_section(doc: str) -> dict[str, str]:
    """{exception class: the text of its entries, joined} of a docstring's `Raises:` section."""
    lines = inspect.cleandoc(doc or "").splitlines()
    stripped = [line.strip() for line in lines]
    if "Raises:" not in stripped:
        return {}
    start = stripped.index("Raises:")
    indent = len(lines[start]) - len(lines[start].lstrip())
    entries: dict[str, list[str]] = {}
    current = None
    for line in lines[start + 1:]:
        if line.strip() and len(line) - len(line.lstrip()) <= indent:
            break  # the next section, or the end of the indented block
        match = ENTRY.match(line.strip())
        if match and len(line) - len(line.lstrip()) == indent + 4:
            current = match.group(1)
            entries.setdefault(current, []).append(match.group(2))
        elif current is not None and line.strip():
            entries[current][-1] += " " + line.strip()
    return {name: " ".join(" ".join(texts).split()) for name, texts in entries.items()}


def expected_error(outputs: dict) -> str | None:
    """The exception class a case's outputs say was raised, or None when it is not an error case."""
    unknown = [k for k in outputs if "raise" in k and k not in ("raises", "raises_value_error")]
    if unknown:
        raise AssertionError(f"outputs {unknown}: a convention for error cases this test does not know; teach it")
    if isinstance(outputs.get("raises"), str):
        return outputs["raises"]
    flags = outputs.get("raises_value_error", False)
    return "ValueError" if flags is True or (isinstance(flags, list) and any(flags)) else None


def contract_problems(suite: types.ModuleType, reference) -> list[str]:
    """What the suite's error cases and the reference's `Raises:` section disagree on (empty: nothing)."""
    documented = dict(getattr(suite, "RAISES", {}))
    section = raises_section(reference.__doc__)
    problems = []
    errors = {}
    for name, inputs in suite.make_inputs(torch.Generator().manual_seed(SEED)):
        outputs = run_case(suite, reference, inputs)
        if "__error__" in outputs:
            problems.append(f"the reference fails on case {name!r}: {outputs['__error__']}")
        elif (error := expected_error(outputs)) is not None:
            errors[name] = error
    for name, error in errors.items():
        if name not in documented:
            problems.append(f"error case {name!r} ({error}) has no entry in RAISES: name its phrase of the docstring")
        elif error not in section:
            problems.append(f"error case {name!r}: the docstring's Raises: section has no {error} entry")
        elif " ".join(documented[name].split()) not in section[error]:
            problems.append(f"error case {name!r}: {documented[name]!r} is not in the Raises: entries for {error}")
    problems += [f"RAISES names {name!r}, which is not an error case of the suite" for name in documented if name not in errors]
    return problems


@pytest.mark.parametrize("name", suite_names())
def test_every_error_case_is_named_in_the_docstring(name):
    suite = load_suite(name)
    problems = contract_problems(suite, getattr(course_lib, suite.GRADED))
    assert not problems, f"suite {name}:\n" + "\n".join(problems)


def _fake_suite(raises: dict) -> types.ModuleType:
    """A suite with one plain case and one error case (a mask of another shape), as the suites write them."""
    suite = types.ModuleType("fake_suite")
    suite.GRADED, suite.RAISES = "masked_mean", raises

    def call(fn, inputs):
        try:
            fn(inputs["x"], inputs["mask"])
        except Exception as e:  # noqa: BLE001 - as the suites do
            return {"raises": "ValueError" if isinstance(e, ValueError) else "other"}
        return {"raises": None}

    suite.make_inputs = lambda gen: [("fine", {"x": torch.ones(2, 3), "mask": torch.ones(2, 3)}),
                                     ("error_mask_of_another_shape", {"x": torch.ones(2, 3), "mask": torch.ones(4, 5)})]
    suite.call = call
    return suite


def _checked_mean(x, mask):
    """The mean of x where mask is 1.

    Raises:
        ValueError: a mask
            of another shape than x.
    """
    if mask.shape != x.shape:
        raise ValueError("mask and x differ in shape")
    return course_lib.masked_mean(x, mask)


def test_the_check_names_each_disagreement():
    """It passes the right map, and names an error case left out, a phrase the docstring lacks, an
    entry for a case that is no error, and a docstring without the class's entry."""
    assert raises_section(_checked_mean.__doc__) == {"ValueError": "a mask of another shape than x."}
    right = {"error_mask_of_another_shape": "a mask of another shape"}
    assert contract_problems(_fake_suite(right), _checked_mean) == []
    missing = contract_problems(_fake_suite({}), _checked_mean)
    assert len(missing) == 1 and "'error_mask_of_another_shape' (ValueError) has no entry" in missing[0], missing
    wrong_phrase = contract_problems(_fake_suite({"error_mask_of_another_shape": "a mask of another dtype"}), _checked_mean)
    assert len(wrong_phrase) == 1 and "is not in the Raises: entries for ValueError" in wrong_phrase[0], wrong_phrase
    stale = contract_problems(_fake_suite({**right, "fine": "a mask"}), _checked_mean)
    assert stale == ["RAISES names 'fine', which is not an error case of the suite"], stale
    undocumented = lambda x, mask: _checked_mean(x, mask)  # noqa: E731 - the same function, no docstring
    assert "has no ValueError entry" in contract_problems(_fake_suite(right), undocumented)[0]
