"""One folder per graded function: `<name>/__init__.py`, its harness, is how the judge calls it
(public: a student kit and the grading sandbox hold the harnesses and this file);
`<name>/grader.py` is how its hidden cases are drawn, its correct versions and its known mistakes
(grader-only); `<name>/test_<name>.py` holds the reference's own tests. The `_*.py` modules here
are cases several folders share (grader-only).
"""
