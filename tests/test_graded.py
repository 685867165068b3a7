"""Every graded function's folder (`autograder/graded/<name>/`), run the same way.

For each folder: it is whole (its harness names the function it grades; its grader.py holds at
least three independent correct versions and a catalogue of at least one realistic mistake); each
correct version earns full marks through the real judge on the hidden cases, and no mistake is
named for it; each known mistake (and each SAME_MISTAKES version) loses its points there, fails
the cases it names and is named; and on many fresh draws of the cases every correct version
passes and every mistake fails its cases (`tests.helpers`: `check_correct_version`,
`check_mistake`, `check_many_draws`). The tests of one folder share one xdist group, so that
`pytest -n 2 --dist loadgroup` runs a folder's judge once. Graded helpers (`_SelectedLogProb`) and
constants (`_FINAL_ANSWER`) are graded through the function that uses them. The reference's own
tests are each folder's test_<name>.py.
"""

from __future__ import annotations

import pytest

from autograder.assignments import registry
from autograder.mistakes import catalogue, catalogue_files
from autograder.suite_api import load_suite, suite_names
from tests.helpers import check_correct_version, check_many_draws, check_mistake

SUITES = suite_names()


def graded_functions() -> list[str]:
    return [g.name for g in registry() if not g.name.startswith("_") and not g.name.isupper()]


def by_folder(labels) -> list:
    """pytest params "<suite>-<label>", each in its folder's xdist group."""
    return [pytest.param(suite, label, id=f"{suite}-{label}", marks=pytest.mark.xdist_group(suite))
            for suite in SUITES for label in labels(suite)]


def test_the_registry_grades_functions():
    assert len(graded_functions()) >= 15


@pytest.mark.parametrize("name", graded_functions())
def test_graded_function_has_its_folder(name):
    assert name in SUITES, f"{name} is graded but has no folder autograder/graded/{name}/"


@pytest.mark.parametrize("suite", SUITES)
def test_the_folder_is_whole(suite):
    """Its harness grades the function it is named for; its grader.py draws cases, holds at least
    three correct versions and a catalogue of realistic mistakes (whose rules are checked as it
    loads: names, one-line sentences, named cases)."""
    module = load_suite(suite)
    assert module.GRADED == suite, f"autograder/graded/{suite}/__init__.py grades {module.GRADED!r}"
    correct = getattr(module, "CORRECT", None)
    assert isinstance(correct, dict) and len(correct) >= 3, \
        f"autograder/graded/{suite}/grader.py: CORRECT needs at least 3 independent correct versions"
    assert len(catalogue(suite)) >= 1, f"autograder/graded/{suite}/grader.py catalogues no realistic mistake"
    assert suite in catalogue_files()


@pytest.mark.slow
@pytest.mark.parametrize("suite, label", by_folder(lambda suite: list(load_suite(suite).CORRECT)))
def test_correct_version_earns_full_marks(suite, label):
    check_correct_version(suite, label)


@pytest.mark.slow
@pytest.mark.parametrize("suite, label", by_folder(
    lambda suite: list(catalogue(suite)) + [f"same:{k}" for k in getattr(load_suite(suite), "SAME_MISTAKES", {})]))
def test_mistake_loses_its_points(suite, label):
    check_mistake(suite, label)


@pytest.mark.slow
@pytest.mark.parametrize("suite", [pytest.param(s, marks=pytest.mark.xdist_group(s)) for s in SUITES])
def test_each_version_holds_on_many_draws(suite):
    check_many_draws(suite)
