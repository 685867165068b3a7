"""What a graded function's folder is, and how a function is called on one of its cases.

Each graded function has one folder, `autograder/graded/<name>/` (its name: the suite's name, the
graded function's as a rule), of three files:

- `__init__.py`, the *harness*, public (a student kit and the grading sandbox hold it):

      GRADED = "compute_entropy"                  # the course_lib name it grades
      def call(fn, inputs: dict) -> dict:
          '''Run fn on FRESH COPIES of inputs; return named outputs (tensors, floats, ints,
          bools, strings, None, lists/tuples/dicts of them).'''

  and the settings the judge's runner reads (`suite_settings`):
  - TIMEOUT: seconds for all cases of the suite in the student's process (default 120).
  - TRIPWIRE: course_lib names the student's function must not call (default [GRADED]); the runner
    trips on them and on the graded function's "tripwire" twins (`autograder.student_view.tripwire`).
  - WARM: modules a judge runner started ahead of the call imports while it waits (its cases'
    heavy imports: transformers, math_verify), so that a hidden check costs its cases' time.

- `grader.py`, grader-only (never in a kit or the sandbox):

      def make_inputs(gen: torch.Generator) -> list[tuple[str, dict]]:
          '''(case name, inputs) pairs; inputs survive torch.save/torch.load.'''
      CORRECT = {label: a notebook cell's source}  # at least 3 independent correct versions
      MISTAKES = {name: Mistake(sentence, source, cases)}  # its known mistakes (`autograder.mistakes`)

  and, where needed:
  - truth(inputs) -> outputs: the float64 truth computed by the suite itself (a closed form),
    where the function's contract fixes a lower precision inside (e.g. rewards made into a
    float32 tensor from Python floats); by default the reference on the inputs cast up
    (`autograder.precision.upcast`).
  - VARIANTS: "module:name" of other correct implementations (e.g. the trainer's packed GRPO
    update beside the plain graded one, or a `variant_*` function of grader.py); their spread
    from the truth widens the tolerance (`autograder.compare.tolerance`).
  - PERTURB: True to carry the rounding of the inputs through the reference into the tolerance
    (`autograder.precision.perturb`; for the training steps).
  - RAISES: {error case name: the phrase of the reference's `Raises:` section that states it},
    for each case whose expected output is an error (`tests/test_contracts.py` holds the two
    together).
  - SAME_MISTAKES: {label: (mistake name, source)}: a catalogued mistake written another way, which
    recognition must name too; DRAWS (default 40) and NAMED_DRAWS: how many fresh draws of the
    cases the many-draws check of tests/test_graded.py holds the versions to.

- `test_<name>.py`: the reference's own tests (its properties over random inputs, with
  hypothesis), collected by pytest like any test module.

`load_suite(name)` is the whole suite, the harness's names and grader.py's in one namespace (the
grader's view: `make_cases`, the tests); `load_suite(name, HARNESSES)` the harness alone, all a kit
or the sandbox can load. How expected outputs and tolerances are made from a suite:
`autograder.cases`. How outputs are compared: `autograder.compare`. What student code sees:
`autograder.harness`.
"""

from __future__ import annotations

import copy
import importlib
import pkgutil
from types import ModuleType

import torch

GRADED_PACKAGE = "autograder.graded"  # one folder (a package) per graded function
SUITES = "suite"  # the grader's view of a folder: its harness and its grader.py
HARNESSES = "harness"  # the public view: the harness alone (all a student kit or the sandbox holds)
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
    """The graded functions' folders (in a kit or the sandbox: those it holds). `package` is kept
    for the callers that name a view: both views list the same folders."""
    pkg = importlib.import_module(GRADED_PACKAGE)
    return sorted(m.name for m in pkgutil.iter_modules(pkg.__path__) if m.ispkg and not m.name.startswith("_"))


_WHOLE: dict[str, ModuleType] = {}


def load_suite(name: str, package: str = SUITES) -> ModuleType:
    """The suite `name`: with `package=SUITES` (the default, the grader's view) one namespace of its
    harness's names and its grader.py's, named as its folder; with `package=HARNESSES` its harness
    alone (`call` and the settings: all a kit or the sandbox holds)."""
    if package not in (SUITES, HARNESSES):
        raise ValueError(f"package is SUITES or HARNESSES, not {package!r}")
    if name not in suite_names():
        raise KeyError(f"no graded function's folder named {name!r} in autograder/graded/ "
                       f"(known: {', '.join(suite_names())})")
    harness = importlib.import_module(f"{GRADED_PACKAGE}.{name}")
    _require(harness, ("GRADED", "call"), f"autograder/graded/{name}/__init__.py")
    if package == HARNESSES:
        return harness
    if name not in _WHOLE:
        grader = importlib.import_module(f"{GRADED_PACKAGE}.{name}.grader")
        _require(grader, ("make_inputs",), f"autograder/graded/{name}/grader.py")
        whole = ModuleType(harness.__name__, harness.__doc__)
        public = {k: v for k, v in vars(harness).items() if not k.startswith("__")}
        private = {k: v for k, v in vars(grader).items() if not k.startswith("__")}
        both = sorted(k for k in public.keys() & private.keys() if public[k] is not private[k])
        if both:
            raise AttributeError(f"autograder/graded/{name}/grader.py defines {', '.join(both)}, which its "
                                 "__init__.py defines too: import them from there")
        vars(whole).update({**private, **public})
        _WHOLE[name] = whole
    return _WHOLE[name]


def _require(module: ModuleType, names: tuple[str, ...], where: str) -> None:
    for attr in names:
        if not hasattr(module, attr):
            raise AttributeError(f"{where} lacks {attr}")


def suite_settings(suite: ModuleType) -> dict:
    """What the judge's runner reads of a harness: its timeout, tripwire and warm imports."""
    from .student_view import tripwire

    return {
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
