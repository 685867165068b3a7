"""What a hidden-case suite is, and how a function is called on one of its cases.

A suite is a module `autograder/suites/<graded_name>.py` defining:

    GRADED = "compute_entropy"                  # the course_lib name it grades
    def make_inputs(gen: torch.Generator) -> list[tuple[str, dict]]:
        '''(case name, inputs) pairs; inputs survive torch.save/torch.load.'''
    def call(fn, inputs: dict) -> dict:
        '''Run fn on FRESH COPIES of inputs; return named outputs (tensors, floats, ints,
        bools, strings, None, lists/tuples/dicts of them).'''

Optional settings:

- CHECK_DTYPE (default True): a tensor of another dtype than the reference's fails.
- TIMEOUT: seconds for all cases of the suite in the student's process (default 120).
- TRIPWIRE: course_lib names the student's function must not call (default [GRADED]); the runner
  trips on them and on the graded function's "tripwire" twins (`autograder.student_view.tripwire`).
- PERTURB: True to carry the rounding of the inputs through the reference into the tolerance
  (`autograder.cases.perturb`; for the training steps).
- WARM: modules a judge runner started ahead of the call imports while it waits (its cases'
  heavy imports: transformers, math_verify), so that a hidden check costs its cases' time.
- VARIANTS: "module:name" of other correct implementations (e.g. the trainer's packed GRPO
  update beside the plain graded one, or a grader-only `variant_*` function of the suite); their
  spread from the truth widens the tolerance (`autograder.compare.tolerance`).
- truth_inputs(inputs) -> inputs: the same case in float64, where casting every floating
  tensor up (`autograder.cases.upcast`, the default) is not the whole story.
- truth(inputs) -> outputs: the float64 truth computed by the suite itself (a closed form),
  where the function's contract fixes a lower precision inside (e.g. rewards made into a
  float32 tensor from Python floats).
- RAISES: {error case name: the phrase of the reference's `Raises:` section that states it}, for
  each case whose expected output is an error (`tests/test_contracts.py` holds the two together).

How expected outputs and tolerances are made from a suite: `autograder.cases`. How outputs are
compared: `autograder.compare`. Student code (a kit, the grading sandbox) sees each suite's
*harness* only: the suite without `make_inputs`, `truth` and `truth_inputs` (`autograder.harness`).
"""

from __future__ import annotations

import copy
import importlib
import pkgutil
from types import ModuleType

import torch

SUITES = "autograder.suites"  # the package of the suites; a student kit has only their harnesses
HARNESSES = "autograder.harness"
DEFAULT_TIMEOUT = 120.0
PRACTICE_SEED = 0  # the public seed of the practice cases (`make check`, the student kits)
RUN_SEED = 0  # the global torch seed every call of a graded function starts from (`run_case`)


_TOKENIZER: list = []


def course_tokenizer():
    """The course tokenizer, loaded once per process, for a suite's `call`: shared, so a case that
    changes it works on a copy (`copy.deepcopy`)."""
    if not _TOKENIZER:
        from transformers import AutoTokenizer

        from course_lib.paths import DATA_DIR

        _TOKENIZER.append(AutoTokenizer.from_pretrained(str(DATA_DIR / "tokenizer")))
    return _TOKENIZER[0]


def suite_names(package: str = SUITES) -> list[str]:
    pkg = importlib.import_module(package)
    return sorted(m.name for m in pkgutil.iter_modules(pkg.__path__) if not m.name.startswith("_"))


def load_suite(name: str, package: str = SUITES) -> ModuleType:
    """The suite module `name`. In a student kit (`package=HARNESSES`) a suite is its harness
    only: `call` and the settings, without `make_inputs` (the practice cases are files)."""
    if name not in suite_names(package):
        raise KeyError(f"no hidden-case suite named {name!r} (known: {', '.join(suite_names(package))})")
    suite = importlib.import_module(f"{package}.{name}")
    needed = ("GRADED", "make_inputs", "call") if package == SUITES else ("GRADED", "call")
    for attr in needed:
        if not hasattr(suite, attr):
            raise AttributeError(f"suite {name!r} lacks {attr}")
    return suite


def suite_settings(suite: ModuleType) -> dict:
    from .student_view import tripwire

    return {
        "check_dtype": bool(getattr(suite, "CHECK_DTYPE", True)),
        "timeout": float(getattr(suite, "TIMEOUT", DEFAULT_TIMEOUT)),
        "tripwire": tripwire(suite),  # the suite's TRIPWIRE and its graded function's tripwire twins
        "warm": list(getattr(suite, "WARM", ())),
    }


def run_case(suite: ModuleType, fn, inputs: dict) -> dict:
    """Outputs of `suite.call(fn, inputs)` in plain form (`autograder.compare.normalize`); an
    exception becomes {"__error__": its class name when a builtin one, else a generic word}.

    A suite may turn an exception it expects into an output itself (e.g. {"raises": "ValueError"}).
    Every call starts from the same state of torch's global random generator (RUN_SEED; the
    caller's state is restored after), so a function that draws from it (a known mistake: the
    generator it is given ignored) gives the same outputs in the judge's runner as where a known
    mistake's outputs were recorded (`autograder.signatures`).
    """
    from .compare import OutputError, normalize

    try:
        with torch.random.fork_rng(devices=[]):
            torch.default_generator.manual_seed(RUN_SEED)  # the CPU's only: torch.manual_seed formats a stack
            out = suite.call(fn, copy.deepcopy(inputs))
    except Exception as e:  # noqa: BLE001 - any failure of the graded function is a result
        return {"__error__": exception_name(e)}
    if not isinstance(out, dict):
        raise OutputError(f"suite {suite.__name__} call() must return a dict, got {type(out).__name__}")
    return normalize(out)


def exception_name(e: BaseException) -> str:
    """The exception's class name when it is a builtin one, else a generic word."""
    import builtins

    name = type(e).__name__
    return name if getattr(builtins, name, None) is type(e) else "an exception of a custom class"
