# nbgrader configuration of the course. The grading tools copy this file into the temporary
# course folder where nbgrader runs (source/, release/, submitted/, autograded/, gradebook.db).
c = get_config()  # noqa: F821 - provided by traitlets when nbgrader loads the file

c.CourseDirectory.source_directory = "source"
c.CourseDirectory.release_directory = "release"
c.CourseDirectory.submitted_directory = "submitted"
c.CourseDirectory.autograded_directory = "autograded"
c.CourseDirectory.feedback_directory = "feedback"

# release notebooks: graded regions become this stub (its message says what to do: the student reads it
# under the traceback), outputs are cleared
c.ClearSolutions.code_stub = {
    "python": '# YOUR CODE HERE\nraise NotImplementedError("replace this line with your code, then run this cell and the ones below it")'}
c.ClearOutput.enabled = True

# autograding: a cell may take a while (the hidden checks start fresh processes); the whole
# notebook is bounded by the grading command's own time limit
c.Execute.timeout = 300
c.Execute.allow_errors = True
c.Execute.interrupt_on_timeout = True
c.Execute.raise_on_iopub_timeout = False
# the outputs are in once the last cell has run: stop the kernel at once rather than waiting up to
# seconds for a graceful exit (measured: 3 s of a submission's time)
c.Execute.shutdown_kernel = "immediate"
