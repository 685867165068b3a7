"""How the judge calls `kl_k2(policy_log_probs, ref_log_probs) -> (...)` on a hidden case: `call`
(fresh copies of the case's inputs in, named outputs out) and its settings. Public: a student kit
and the grading sandbox hold this file; the cases, the correct versions and the known mistakes are
grader.py's.
"""

from __future__ import annotations

from autograder.graded.kl_k1 import call  # noqa: F401 - the estimators take and return the same things

GRADED = "kl_k2"
