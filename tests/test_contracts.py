"""The docstring of every graded function is its whole contract, and the markdown a student reads
before the graded cell states the same errors and dtypes.

A student reads the docstring (the stub keeps it), and the notebook's text above the cell, not
always both. So each suite maps its error cases to the phrase of the reference's `Raises:` section
that states them (`RAISES = {case name: phrase}`), and this module holds the map to the cases: it
draws every suite's cases with a fixed seed, runs the reference on them, and finds the error cases
by their outputs, in each convention the suites use:

- {"raises": "ValueError"}: the suite caught the exception and names its class (None: no error);
- {"raises_value_error": True}, or a list of such flags, one per input of the case.

Then (1) every error case has an entry, (2) every entry is an error case, (3) its phrase is in
the `Raises:` entry of the exception class the case expects ("ValueError: <when>"). An error case
added without its phrase fails here, and so does an entry whose case was renamed or removed.

The same run finds the dtypes the cases check (a tensor of another dtype than the reference's
fails a case): for each tensor the function returns, a dtype that does not follow the inputs'
(bool, long, float32 from float64 inputs) must be named ("bool", "long" or "int64", "float32"),
one that follows them must be stated as a dtype ("dtype": "in the log-probs' dtype"), and a
floating input dtype other than float32 and float64 (bfloat16, float16) must be named. Both the
docstring and the markdown above the graded cell must hold every dtype word and every `RAISES`
phrase (compared without case, backticks and asterisks, with ≤ and ≥ read as <= and >=).
"""

from __future__ import annotations

import functools
import inspect
import re
import types
from collections import defaultdict

import pytest
import torch

import course_lib
from autograder.assignments import LESSONS
from autograder.cases import reference_of
from autograder.lesson_format import lesson_files, read_lesson
from autograder.suite_api import load_suite, run_case, suite_names

SEED = 0
ENTRY = re.compile(r"^(\w+): (.+)$")  # "ValueError: when it is raised", one line each
# outputs a suite's call derives from the function's work, whose dtype the function does not choose:
# gradients (autograd's, in the inputs' dtype), a model's parameters after a step, a generator's next draws
DERIVED = ("grad", "parameters", "steps", "next_draws")
# how a docstring or a markdown cell names each dtype ("follows": a dtype that is the inputs')
DTYPE_WORDS = {"bool": r"\bbool", "int64": r"\b(long|int64)\b", "float32": r"\bfloat32\b", "float64": r"\bfloat64\b",
               "bfloat16": r"\bbfloat16\b", "float16": r"\bfloat16\b", "follows": r"\bdtype"}
# (test, suite) pairs whose gaps are known and not yet fixed (none now): strict expected failures,
# so that a fix fails here until its entry goes
KNOWN_GAPS: dict[tuple[str, str], str] = {}


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


def _float_dtypes(x, found: set[str]) -> set[str]:
    """The names of the floating dtypes of the tensors in a case's inputs (nested lists and dicts)."""
    if isinstance(x, torch.Tensor) and x.is_floating_point():
        found.add(str(x.dtype).removeprefix("torch."))
    elif isinstance(x, dict):
        for v in x.values():
            _float_dtypes(v, found)
    elif isinstance(x, (list, tuple)):
        for v in x:
            _float_dtypes(v, found)
    return found


def _tensors(x, key: str, found: list):
    """(top-level output key, dtype name) of every tensor in a case's outputs."""
    if isinstance(x, torch.Tensor):
        found.append((key, str(x.dtype).removeprefix("torch.")))
    elif isinstance(x, dict):
        for k, v in x.items():
            _tensors(v, key or k, found)
    elif isinstance(x, list):
        for v in x:
            _tensors(v, key, found)
    return found


def case_outcomes(suite: types.ModuleType, reference) -> dict:
    """The reference run on every case of the suite (seed SEED): {"errors": {case: exception class},
    "failures": [what failed], "dtypes": {output key: {(dtype, input dtypes)}}} (derived outputs left out)."""
    errors, failures, dtypes = {}, [], defaultdict(set)
    for name, inputs in suite.make_inputs(torch.Generator().manual_seed(SEED)):
        outputs = run_case(suite, reference, inputs)
        if "__error__" in outputs:
            failures.append(f"the reference fails on case {name!r}: {outputs['__error__']}")
        elif (error := expected_error(outputs)) is not None:
            errors[name] = error
        else:
            given = tuple(sorted(_float_dtypes(inputs, set())))
            for key, dtype in _tensors(outputs, "", []):
                if not key.startswith(DERIVED):
                    dtypes[key].add((dtype, given))
    return {"errors": errors, "failures": failures, "dtypes": dict(dtypes)}


@functools.lru_cache(maxsize=None)
def outcomes_of(name: str) -> dict:
    suite = load_suite(name)
    return case_outcomes(suite, reference_of(suite.GRADED))


def contract_problems(suite: types.ModuleType, reference, outcomes: dict | None = None) -> list[str]:
    """What the suite's error cases and the reference's `Raises:` section disagree on (empty: nothing)."""
    outcomes = outcomes or case_outcomes(suite, reference)
    documented = dict(getattr(suite, "RAISES", {}))
    section = raises_section(reference.__doc__)
    problems = list(outcomes["failures"])
    errors = outcomes["errors"]
    for name, error in errors.items():
        if name not in documented:
            problems.append(f"error case {name!r} ({error}) has no entry in RAISES: name its phrase of the docstring")
        elif error not in section:
            problems.append(f"error case {name!r}: the docstring's Raises: section has no {error} entry")
        elif " ".join(documented[name].split()) not in section[error]:
            problems.append(f"error case {name!r}: {documented[name]!r} is not in the Raises: entries for {error}")
    problems += [f"RAISES names {name!r}, which is not an error case of the suite" for name in documented if name not in errors]
    return problems


def dtype_words(dtypes: dict) -> set[str]:
    """The dtype words (keys of DTYPE_WORDS) a contract must hold for outputs of these dtypes: "follows"
    for an output whose dtype is the case's one floating input dtype, the dtype's name for any other
    (bool, long, float32 from float64 inputs), and the floating input dtypes below float32."""
    words = set()
    for pairs in dtypes.values():
        words |= {"follows" if given == (dtype,) else dtype for dtype, given in pairs}
        words |= {d for _, given in pairs for d in given if d in ("bfloat16", "float16")}
    return words


def plain(text: str) -> str:
    """Text as the contract check compares it: lower case, no backticks or asterisks, one space."""
    text = text.replace("≤", "<=").replace("≥", ">=").replace("`", "").replace("*", "")
    return " ".join(text.lower().split())


def missing_words(text: str, words: set[str]) -> list[str]:
    return sorted(w for w in words if not re.search(DTYPE_WORDS[w], plain(text)))


def markdown_before(graded: str, lessons=LESSONS) -> tuple[str, str]:
    """("file.py:LINE" of the graded cell, the text of the markdown cells right above it, [given]
    cells between them skipped) of the lesson whose [solution] cell holds `graded`."""
    for path in lesson_files(lessons):
        cells = read_lesson(path)
        for i, cell in enumerate(cells):
            if cell.kind == "solution" and any(ref.split(":")[1] == graded for ref in cell.refs):
                texts = []
                for above in reversed(cells[:i]):
                    if above.kind == "given":
                        continue
                    if above.kind != "markdown":
                        break
                    texts.insert(0, "\n".join(re.sub(r"^# ?", "", line) for line in above.body))  # as the build reads it
                return cell.where, "\n".join(texts)
    raise LookupError(f"no [solution] cell of a lesson in {lessons} holds {graded}")


def markdown_problems(suite: types.ModuleType, where: str, markdown: str, outcomes: dict) -> list[str]:
    """The RAISES phrases and dtype words of the suite's cases that the markdown above the graded cell lacks."""
    text = plain(markdown)
    problems = [f"the markdown above {where} lacks the error {phrase!r} (its RAISES phrase)"
                for phrase in sorted(set(getattr(suite, "RAISES", {}).values())) if plain(phrase) not in text]
    problems += [f"the markdown above {where} does not name the dtype {word!r} the cases check"
                 + (" (a dtype that follows the inputs': say 'dtype')" if word == "follows" else "")
                 for word in missing_words(markdown, dtype_words(outcomes["dtypes"]))]
    return problems


def _known(test: str):
    """The suite names, each marked as a strict expected failure where (test, suite) is a known gap."""
    return [pytest.param(n, marks=pytest.mark.xfail(strict=True, reason=KNOWN_GAPS[(test, n)]))
            if (test, n) in KNOWN_GAPS else n for n in suite_names()]


@pytest.mark.parametrize("name", suite_names())
def test_every_error_case_is_named_in_the_docstring(name):
    suite = load_suite(name)
    problems = contract_problems(suite, reference_of(suite.GRADED), outcomes_of(name))
    assert not problems, f"suite {name}:\n" + "\n".join(problems)


@pytest.mark.parametrize("name", _known("docstring_dtypes"))
def test_every_dtype_the_cases_check_is_named_in_the_docstring(name):
    suite = load_suite(name)
    reference = reference_of(suite.GRADED)
    missing = missing_words(reference.__doc__ or "", dtype_words(outcomes_of(name)["dtypes"]))
    assert not missing, (f"{suite.GRADED}'s docstring does not name the dtypes {missing} its cases check "
                         f"('follows': a dtype that is the inputs', stated as a dtype)")


@pytest.mark.parametrize("name", _known("markdown"))
def test_the_markdown_above_the_graded_cell_names_every_error_and_dtype(name):
    suite = load_suite(name)
    where, markdown = markdown_before(suite.GRADED)
    problems = markdown_problems(suite, where, markdown, outcomes_of(name))
    assert not problems, f"suite {name}:\n" + "\n".join(problems)


def _fake_suite(raises: dict) -> types.ModuleType:
    """A suite with one plain case and one error case (a mask of another shape), as the suites write them."""
    suite = types.ModuleType("fake_suite")
    suite.GRADED, suite.RAISES = "masked_mean", raises

    def call(fn, inputs):
        try:
            mean = fn(inputs["x"], inputs["mask"])
        except Exception as e:  # noqa: BLE001 - as the suites do
            return {"raises": "ValueError" if isinstance(e, ValueError) else "other"}
        return {"raises": None, "mean": mean}

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


def test_the_dtype_words_follow_the_cases():
    """A dtype that is always the inputs' asks for "dtype"; a fixed one (bool, long, float32 from any
    input) asks for its name; an input of bfloat16 or float16 asks for its name too."""
    follows = {"loss": {("float32", ("float32",)), ("float64", ("float64",))}}
    assert dtype_words(follows) == {"follows"}
    assert dtype_words({"mask": {("bool", ())}, "ids": {("int64", ())}}) == {"bool", "int64"}
    assert dtype_words({"entropy": {("float32", ("bfloat16",)), ("float64", ("float64",))}}) == {"float32", "follows",
                                                                                              "bfloat16"}
    assert dtype_words({"fraction": {("float32", ("float64",))}}) == {"float32"}
    assert missing_words("Returns (B,) float32, in the dtype of x; a `long` id", {"float32", "follows", "int64"}) == []
    assert missing_words("Returns the loss.", {"follows", "bool"}) == ["bool", "follows"]


def test_the_markdown_check_names_each_missing_phrase_and_dtype(tmp_path):
    """The markdown above a graded cell (a [given] cell between them skipped) is read as a student
    reads it, and each RAISES phrase or dtype word it lacks is named."""
    (tmp_path / "01_demo.py").write_text(
        "# %% [markdown]\n# Intro, far above.\n\n# %%\nimport torch\n\n"
        "# %% [markdown]\n# The mean of `x` where the mask is 1, in the inputs' **dtype**.\n"
        "# Raise a `ValueError` for a mask of another shape.\n\n"
        "# %% [given] course_lib.masking:masked_mean\n\n# %% [solution] course_lib.demo:checked_mean\n", encoding="utf-8")
    where, markdown = markdown_before("checked_mean", lessons=tmp_path)
    assert where == "01_demo.py:13" and "Intro" not in markdown and "inputs' **dtype**" in markdown
    suite = _fake_suite({"error_mask_of_another_shape": "a mask of another shape"})
    outcomes = case_outcomes(suite, _checked_mean)
    assert outcomes["dtypes"] == {"mean": {("float32", ("float32",))}}
    assert markdown_problems(suite, where, markdown, outcomes) == []
    suite.RAISES = {"error_mask_of_another_shape": "a mask of another dtype"}
    lacking = markdown_problems(suite, where, markdown.replace("dtype", "precision"), outcomes)
    assert len(lacking) == 2 and "lacks the error 'a mask of another dtype'" in lacking[0] and "'follows'" in lacking[1]
