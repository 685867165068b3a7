"""`python -m course_lib.training sft|grpo|eval ...`: the reference trainings' command line (see `cli`)."""

import sys

from .cli import main

sys.exit(main())
