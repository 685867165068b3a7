"""Hidden-case suites, one module per graded `course_lib` function (interface: `autograder.suite_api`)."""
