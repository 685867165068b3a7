"""How the judge calls `continuous_batch_generate(step, requests, batch_size, eos_id) -> dict` on a
hidden case: `call` (fresh copies of the case's inputs in, named outputs out) and its settings.
Public: a student kit and the grading sandbox hold this file; the cases, the correct versions and
the known mistakes are grader.py's.
"""

from __future__ import annotations

GRADED = "continuous_batch_generate"
TRIPWIRE = ["continuous_batch_generate", "static_batch_generate"]


def call(fn, inputs: dict) -> dict:
    from course_lib.batching import run_checked

    return run_checked(fn, **inputs)
