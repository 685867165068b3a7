"""Fixtures the test modules share (plain helper functions live in `tests/helpers.py`)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def hidden_cases():
    """Hidden-case files of every suite, generated (fresh secret seed) where missing or stale."""
    from autograder.engine import suite_names
    from autograder.judge import ensure_cases

    for name in suite_names():
        ensure_cases(name)


@pytest.fixture(scope="session")
def tok():
    """The course tokenizer (data/tokenizer)."""
    from tests.helpers import course_tokenizer

    return course_tokenizer()
