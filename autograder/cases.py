"""Hidden and practice cases: drawn by a suite, expected values from the reference in float64.

For each case a suite's `make_inputs` draws (`autograder.suite_api`), the grader runs the
`course_lib` reference three ways:

1. on the inputs as drawn (float32 mostly, some bfloat16, float16 or float64): the *native*
   output, which fixes the structure, shapes and dtypes a correct output has;
2. on the same inputs cast up to float64 (`autograder.precision.upcast`), or the suite's closed
   form `truth`: the *truth* every floating output is compared with;
3. the suite's VARIANTS (other correct implementations) on the inputs as drawn and, where the
   suite sets PERTURB = True, the reference on the inputs moved by one unit of rounding
   (`autograder.precision.perturb`: the training steps, whose updates carry a cancelling sum's
   rounding through AdamW). Not by default: a contract may ask for more accuracy than the
   inputs' rounding allows a careless formula (an entropy exact at logits shifted by 1e4, where a
   max shift keeps every difference exact and a perturbation of the inputs does not).

The distance of these from the truth is the rounding a correct computation of this case shows;
it sets each output's tolerance (`autograder.compare`). A draw
on which the reference's own rounding is not small (a near-tie, a discontinuity) is redrawn
(`CaseDraws` attempts). A float64 case (every floating input float64) is its own truth.

Each case also says whether the contract asks for an error there (`error_case`: the reference's
output is an error the suite turned into an output), and the cases of a suite come with each
known mistake's signature on them (`autograder.signatures`: what the judge compares a failing
function with, to name the mistake it makes).

Case files (`HIDDEN_DIR/<suite>.pt`, git-ignored) carry the suite's fingerprint: a hash of the
suite's folder (its harness and grader.py, which holds its catalogue of mistakes), of the cases
the suites share, of the whole `course_lib` and of the case and comparison code. `ensure_cases`
regenerates a file (with a fresh secret seed) only when it is missing or its fingerprint is stale,
under a file lock, so parallel test workers and grading runs never race.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import torch

from .compare import NearTie, expected_tree, normalize, widened
from .precision import case_precision, perturb, upcast
from .signatures import signatures
from .suite_api import load_suite, run_case

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parent
HIDDEN_DIR = Path(os.environ.get("AUTOGRADER_HIDDEN_DIR", HERE / "hidden"))
SEEDED_DIR = REPO_ROOT / "build" / "cases"  # cases drawn with a public seed (git-ignored): `seeded_cases`
CASE_DRAWS = 5  # draws of a suite's inputs before a near-tie is a bug of the suite


def _reference(dotted: str):
    import importlib

    module, _, name = dotted.partition(":")
    return getattr(importlib.import_module(module), name)


def reference_of(graded: str):
    """The course_lib object graded as `graded`: from the module its lesson's header names
    (`course_lib.<module>:<name>`), else the package's own name (a function no lesson grades yet)."""
    import course_lib

    from .assignments import registry

    module = next((g.module for g in registry() if g.name == graded), "course_lib")
    return _reference(f"{module}:{graded}") if module != "course_lib" else getattr(course_lib, graded)


def rounding_bounds(suite, reference, inputs: dict, precision: torch.dtype):
    """The tree of a case's rounding bounds (`autograder.rounding.bound_run`): the reference run
    once more on the case's float64 inputs."""
    from .rounding import bound_run

    out, bounds = bound_run(lambda: run_case(suite, reference, upcast(inputs)), precision)
    if "__error__" in out:
        raise RuntimeError(f"suite {suite.GRADED!r}: the reference fails in float64 under the rounding bound "
                           f"({out['__error__']})")
    return bounds


def make_case(suite, reference, variants: list, case_name: str, inputs: dict, with_bounds: bool = True) -> dict:
    """One case: its inputs and the tree of expected outputs (raises NearTie to redraw); their
    tolerances hold the case's rounding bounds unless `with_bounds=False`."""
    native = run_case(suite, reference, inputs)
    if "__error__" in native:  # a suite turns errors it expects into outputs itself
        raise RuntimeError(f"the reference fails on case {case_name!r} of suite {suite.GRADED!r}: {native['__error__']}")
    precision = case_precision(inputs)
    if hasattr(suite, "truth"):  # the suite's closed form
        truth = normalize(suite.truth(inputs))
    else:
        truth = native if precision == torch.float64 else run_case(suite, reference, upcast(inputs))
    others = [run_case(suite, v, inputs) for v in variants]
    if getattr(suite, "PERTURB", False):  # the rounding of the inputs, carried through the reference
        others.append(run_case(suite, reference, perturb(inputs, torch.Generator().manual_seed(len(case_name)))))
    for out in [truth, *others]:
        if "__error__" in out:
            raise RuntimeError(f"case {case_name!r} of suite {suite.GRADED!r}: the reference in float64 or a "
                               f"variant fails ({out['__error__']})")
    try:
        expected = expected_tree(native, truth, others, torch.finfo(precision).eps)
    except NearTie as e:
        raise NearTie(f"case {case_name!r}: {e}") from None
    case = {"name": case_name, "inputs": inputs, "expected": expected, "error_case": expects_error(native)}
    return bounded_case(suite, case) if with_bounds else case  # after the near-tie check: a redrawn case needs none


def bounded_case(suite, case: dict) -> dict:
    """A case made without its rounding bounds (`make_case(..., with_bounds=False)`), with them
    (`suite`: the suite module or its name): a tolerance with its bound is never tighter than
    without, so a test may compare with the case as it is first and pay for the bound only where
    that comparison fails."""
    suite = load_suite(suite) if isinstance(suite, str) else suite
    bounds = rounding_bounds(suite, reference_of(suite.GRADED), case["inputs"], case_precision(case["inputs"]))
    return {**case, "expected": widened(case["expected"], bounds)}


def expects_error(native) -> bool:
    """Whether the reference's output on a case says the contract asks for an error (a suite turns
    the error it expects into an output: {"raises": "ValueError"}, {"raises_value_error": True})."""
    return isinstance(native, dict) and any(k.startswith("raises") and v not in (None, False) for k, v in native.items())


def make_suite_cases(name: str, seed: int, mistakes: bool = True, bounds: bool = True) -> dict:
    """Inputs and expected outputs of one suite (grader side only) and, unless `mistakes=False`, the
    signature of each known mistake on them (`autograder.signatures`: what the judge recognises).
    `bounds=False` leaves the rounding bounds out of the tolerances (the rule before them, tighter:
    what a test compares the rule with)."""
    suite = load_suite(name)
    reference = reference_of(suite.GRADED)
    variants = [_reference(v) for v in getattr(suite, "VARIANTS", [])]
    problem = None
    for draw in range(CASE_DRAWS):
        gen = torch.Generator().manual_seed(seed if draw == 0 else hash((seed, draw)) & (2**63 - 1))
        try:
            drawn = suite.make_inputs(gen)
            names = [n for n, _ in drawn]
            if len(set(names)) != len(names):
                raise ValueError(f"suite {name!r} has two cases of the same name")
            cases = [make_case(suite, reference, variants, n, inputs, with_bounds=bounds) for n, inputs in drawn]
            data = {"suite": name, "graded": suite.GRADED, "fingerprint": fingerprint(name), "cases": cases}
            if mistakes:
                data["mistakes"] = signatures(name, suite, cases)
            return data
        except NearTie as e:
            problem = e
    raise RuntimeError(f"suite {name!r}: {CASE_DRAWS} draws in a row hit a near-tie ({problem}); the suite's "
                       "inputs put a comparison or a discontinuity of the reference within rounding")


def fingerprint(name: str) -> str:
    """A hash of the suite's folder (its harness and grader.py), of the cases the suites share
    (`autograder/graded/_*.py`), of every course_lib source file and of the case, signature,
    recognition (each mistake's `covers`), catalogue and comparison code: case files older than
    any of them are stale. The folder's own tests are not in it (they make no case)."""
    import course_lib

    h = hashlib.sha256()
    lib = Path(course_lib.__file__).resolve().parent
    graded = HERE / "graded"
    code = [HERE / f"{m}.py" for m in ("compare", "suite_api", "cases", "precision", "rounding", "signatures",
                                       "recognition", "mistakes")]
    for path in [graded / name / "__init__.py", graded / name / "grader.py", *sorted(graded.glob("_*.py")), *code,
                 *sorted(lib.rglob("*.py"))]:
        h.update(str(path.name).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def case_path(name: str, hidden_dir: Path | None = None) -> Path:
    return Path(hidden_dir or HIDDEN_DIR) / f"{name}.pt"


def save_cases(data: dict, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    torch.save(data, tmp)
    os.replace(tmp, path)


def load_cases(name: str, hidden_dir: Path | None = None) -> dict:
    path = case_path(name, hidden_dir)
    if not path.is_file():
        raise FileNotFoundError(f"no hidden cases for {name!r} at {path}: the grader runs `python -m autograder.make_cases`")
    return torch.load(path, weights_only=False)  # a grader-made file: trusted


def _fresh(name: str, hidden_dir: Path | None) -> bool:
    if not case_path(name, hidden_dir).is_file():
        return False
    try:
        return load_cases(name, hidden_dir).get("fingerprint") == fingerprint(name)
    except Exception:  # noqa: BLE001 - an unreadable file is regenerated
        return False


def ensure_cases(name: str, hidden_dir: Path | None = None, seed: int | None = None) -> Path:
    """The case file of suite `name`, (re)generated when missing or stale (a fresh secret seed),
    under a lock so that concurrent callers generate it once."""
    import fcntl
    import secrets

    folder = Path(hidden_dir or HIDDEN_DIR)
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / f".{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not _fresh(name, hidden_dir):
            save_cases(make_suite_cases(name, secrets.randbits(63) if seed is None else seed), case_path(name, hidden_dir))
    return case_path(name, hidden_dir)


def seeded_cases(name: str, seed: int) -> dict:
    """The cases of suite `name` drawn with the public `seed`, with the known mistakes' signatures,
    made once per fingerprint into `SEEDED_DIR/seed<seed>/` (`ensure_cases`' lock: once for every
    process that asks): the practice cases of `make check` in the repository and of the kits, and
    the first draw of the tests' many-draws check, share them."""
    folder = SEEDED_DIR / f"seed{seed}"
    ensure_cases(name, folder, seed=seed)
    return load_cases(name, folder)
