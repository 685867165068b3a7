"""Every graded function has its corpus: a module tests/graded/test_<name>.py with the suite it
grades and at least three independent correct versions, and a catalogue of at least one realistic
mistake, autograder/mistakes/<name>.py (CONTRIBUTING.md, "Adding a graded function"). Graded
helpers (`_SelectedLogProb`) and constants (`_FINAL_ANSWER`) are graded through the function that
uses them."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from autograder.assignments import registry
from autograder.mistakes import catalogue, has_catalogue
from autograder.suite_api import load_suite

HERE = Path(__file__).resolve().parent


def graded_functions() -> list[str]:
    return [g.name for g in registry() if not g.name.startswith("_") and not g.name.isupper()]


def test_the_registry_grades_functions():
    assert len(graded_functions()) >= 15


@pytest.mark.parametrize("name", graded_functions())
def test_graded_function_has_a_corpus(name):
    path = HERE / f"test_{name}.py"
    assert path.is_file(), f"{name} is graded but has no corpus module {path.relative_to(HERE.parent.parent)}"
    module = importlib.import_module(f"tests.graded.test_{name}")
    assert getattr(module, "SUITE", None) == name, f"{path.name} must define SUITE = {name!r}"
    assert load_suite(name).GRADED == name
    correct = getattr(module, "CORRECT", {})
    assert isinstance(correct, dict) and len(correct) >= 3, f"{path.name}: CORRECT needs at least 3 independent correct versions"
    assert not hasattr(module, "MISTAKES"), f"{path.name}: its mistakes belong in the catalogue autograder/mistakes/{name}.py"
    assert has_catalogue(name) and len(catalogue(name)) >= 1, \
        f"{name} is graded but autograder/mistakes/{name}.py catalogues no realistic mistake"
    for test in ("test_correct_version_earns_full_marks", "test_mistake_loses_its_points"):
        assert callable(getattr(module, test, None)), f"{path.name} must bind {test} = corpus_tests(...)"


def test_every_catalogue_belongs_to_a_graded_function():
    """A catalogue (its rules are checked as it loads: names, one-line sentences, named cases) is
    for a suite that exists."""
    from autograder.mistakes import catalogue_files
    from autograder.suite_api import suite_names

    assert set(catalogue_files()) <= set(suite_names())
    for name in catalogue_files():
        catalogue(name)
