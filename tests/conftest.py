"""Fixtures the test modules share (plain helper functions live in `tests/helpers.py`).

Hidden cases are made by the tests that use them, suite by suite (`autograder.cases.ensure_cases`:
regenerated only when missing or stale, under a file lock, so parallel workers never race)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def tok():
    """The course tokenizer (data/tokenizer)."""
    from tests.helpers import course_tokenizer

    return course_tokenizer()
