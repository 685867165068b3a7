"""The course's grader side: nbgrader configuration, hidden-case suites and checker, grading command.

- `autograder.suites.<name>`: one hidden-case suite per graded function (see `engine.py` for the
  interface every suite follows).
- `autograder.assignments`: which graded name belongs to which assignment, read from the lessons'
  `[solution]` headers; `autograder.stubs`: a copy of `course_lib` whose graded names of the open
  assignments raise NotImplementedError (what the judge, the grading kernel and a kit run with).
- `python -m autograder.make_cases`: generates the hidden cases from the reference implementation
  with a grader-side secret seed into `autograder/hidden/` (git-ignored, never published).
- `autograder.checker.check_hidden(name, fn)`: what hidden-test cells call.
- `python -m autograder.release`: regenerates the student notebooks (`notebooks/`) from
  `solutions/` with `nbgrader generate_assignment`.
- `python -m autograder.grade ASSIGNMENT`: grades a folder of submissions, sandboxed, in parallel;
  `python -m autograder.feedback ASSIGNMENT`: their feedback HTML.
- `python -m autograder.kit ASSIGNMENT --out DIR`: the student kit of an assignment;
  `python -m autograder.practice NN`: a student's notebook NN on practice cases (`make check`).
"""
