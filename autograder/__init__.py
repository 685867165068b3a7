"""The course's grader side, one module per job.

Each graded function's folder:
- `graded/<name>/`: `__init__.py`, its harness (how the judge calls it; public), `grader.py` (how
  its hidden cases are drawn, its correct versions and its catalogue of known mistakes;
  grader-only), `test_<name>.py` (the reference's own tests); `suite_api`: what a folder holds and
  how a function is called on one of its cases.

Cases and comparison:
- `cases`: the cases of a suite, their expected values (the float64 truth) and tolerances, the
  case files and their freshness; `precision`: a case's inputs cast up or moved by one unit of
  rounding; `rounding`: each case's rounding bound (how far a correct computation may land from
  the truth in any order of its sums); `compare`: outputs in one plain shape, the comparison, its
  verdicts; `report`: the words a student reads, and what of a report a kernel may receive.

Known mistakes:
- `mistakes`: what a catalogue of known mistakes is (a public name, the sentence a student reads,
  the code that makes it, the cases it must fail; grader-only); `signatures`: each mistake's
  outputs on a draw of cases, made with the cases; `recognition`: which mistakes a failing
  function's outputs match (the judge's side of the comparison).

Running student code:
- `checker.check_hidden(name, fn)`: what a hidden-test cell calls; `protocol`: the wire format
  between a kernel and the judge server (both import it).
- `judge`: the grader's judge: the hidden cases of the assignment being graded, answered a
  bounded number of times (`JudgeServer`), and `python -m autograder.judge NAME`.
- `trial`: one function on a list of cases, in a fresh `runner` process; `harness`: what student
  code may see of all this (the kernel side and each folder's harness).
- `sandbox`: the bubblewrap sandbox, built from what it needs, or, where bubblewrap cannot run,
  the same view from unprivileged ids: `uids` (two ids of its own per submission, found, stopped
  and killed whole) and `confine` (what a process of a role installs on itself: its id, Landlock,
  a seccomp filter); `limits`: time, memory and process limits over a submission's processes
  together; `safe_files`: link-proof, bounded copies;
  `stubs`: a `course_lib` whose graded names of the open assignments (and their twins) raise
  NotImplementedError.
- `assignments`: which graded name belongs to which assignment and which suites a notebook
  calls; `lesson_format`: the lesson grammar (one parser); `course_folder`: nbgrader folders.
- `student_view`: what a student of each assignment sees of `course_lib`, declared once: the twins
  of the graded functions (other functions that compute them) and how each is handled; the stubs,
  the runner's tripwire and `signatures.references_hidden` are made from it.
- `lms`: the grades as Canvas's gradebook imports them, nbgrader's student ids mapped by a roster.
- `gradescope_run`: what a Gradescope autograder does per submission (find the notebook, run the
  grading command, results.json); `gradescope_results`: results.json and a checker of its format.

Commands (no module imports one of them): `python -m autograder.make_cases` (hidden cases with a
secret seed into the git-ignored `autograder/hidden/`), `.release` (notebooks/ from solutions/),
`.grade ASSIGNMENT` (a folder of submissions, sandboxed, in parallel), `.feedback ASSIGNMENT`
(their feedback HTML), `.kit ASSIGNMENT --out DIR` (a student kit), `.practice NN` (`make check`),
`.gradescope build ASSIGNMENT --out DIR` (the assignment's Gradescope autograder zip; its `run` and
`prepare` are what the zip's run_autograder and setup.sh call);
`.class_report ASSIGNMENT --course DIR` (what a graded class got wrong: a table and a figure),
`.twins [NN ...]` (the twin check).
"""
