"""Fixtures the test modules share (plain helper functions live in `tests/helpers.py`)."""

from __future__ import annotations

import pytest


def _ensure_hidden_cases() -> None:
    """Hidden-case files of every suite, generated (fresh secret seed) where missing or stale."""
    from autograder.engine import suite_names
    from autograder.judge import ensure_cases

    for name in suite_names():
        ensure_cases(name)


def pytest_configure(config):
    """Generate the hidden cases once, in the main process, before `pytest -n` starts its workers
    (two workers generating the same file at once would race)."""
    if not hasattr(config, "workerinput"):
        _ensure_hidden_cases()


@pytest.fixture(scope="session")
def hidden_cases():
    """The hidden-case files exist and are fresh (a no-op after pytest_configure made them)."""
    _ensure_hidden_cases()


@pytest.fixture(scope="session")
def tok():
    """The course tokenizer (data/tokenizer)."""
    from tests.helpers import course_tokenizer

    return course_tokenizer()
