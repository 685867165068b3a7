"""What a student of each assignment sees of `course_lib`, declared once: the graded names and their twins.

A *graded name* belongs to the assignment whose lesson's `[solution]` header names it
(`autograder.assignments`); it is open for assignment NN when it belongs to NN or later. A *twin*
is another function of the library that computes what a graded function computes: a student
whose graded cell delegates to it would earn the points without the work. TWINS lists every twin
(found by reading the library, and by running it: `autograder.twins`), each with what is done with
it:

- "stub": stubbed wherever its graded function is, until that assignment closes (the trainer's
  packed GRPO update, while notebook 09 is open: `train_grpo` then runs the plain loop);
- "calls": it calls the graded function itself, so where that is a stub, so is it;
- "tripwire": a released reference of an earlier notebook (it cannot be stubbed): the graded
  function's runner trips on it, as on the names of its suite's TRIPWIRE.

Everything that decides what a student sees is made here, so that the consumers cannot disagree:

    stubbed(NN)              what the stubbed copy of course_lib of assignment NN stubs: the open
                             graded names and the "stub" twins of them (`autograder.stubs`: the
                             student kit, `make check`, the grading sandbox)
    tripwire(suite)          the names the judge's runner trips on: the suite's TRIPWIRE (default:
                             its graded name) and the "tripwire" twins of its graded function
                             (`autograder.suite_api.suite_settings`, read by `autograder.trial`)
    suite_view(suite, NN)    both, for a runner of `suite` while NN is graded (`autograder.stubs.
                             stub_for_suite`, and `autograder.signatures.references_hidden`, which
                             runs a known mistake as the judge runs a student's function)

`tripwire` is read where a suite's harness is all there is (a student kit, the grading sandbox):
this module imports nothing of the grader at its top.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType

HANDLINGS = ("stub", "calls", "tripwire")


@dataclass(frozen=True)
class Twin:
    ref: str  # "course_lib.module:function" of the twin
    of: str  # the graded name it computes
    handled: str  # one of HANDLINGS
    why: str  # what it is, and why it computes the graded function

    @property
    def module(self) -> str:
        return self.ref.partition(":")[0]

    @property
    def name(self) -> str:
        return self.ref.partition(":")[2]


TWINS: tuple[Twin, ...] = (
    # found by running (`autograder.twins`)
    Twin("course_lib.training.grpo_update:packed_grpo_train_step", "grpo_train_step", "stub",
         "the GRPO trainer's update: grpo_train_step's arguments and update, with the rows of weight 0 left out and "
         "the rest packed by length (the suite's own variant: it passes every case)"),
    Twin("course_lib.logprobs:get_response_log_probs", "chunked_response_log_probs", "tripwire",
         "notebook 03's log-probs of the model's full forward, which applies Gemma 2's cap itself: memory is not "
         "graded, so its 'log_probs' pass every case but the cap of 0"),
    Twin("course_lib.grpo:_k3_per_token", "kl_k3", "tripwire",
         "notebook 09's own k3 (given there): r - log r - 1 through exp, log r clamped to 20; it passes every case "
         "but those near r = 1 in float32, where exp loses the value"),
    # found by reading
    Twin("course_lib.rollouts.mismatch_atlas:batch_of", "tokenize_prompt_and_output", "calls",
         "notebook 15's batch of prompt and response ids: the same padding, shift and response mask, on ids "
         "(it was a copy; it now batches through tokenize_prompt_and_output)"),
    Twin("course_lib.gsm8k:as_r1_zero", "gsm8k_to_r1_zero", "calls",
         "the trainers' records in the r1_zero form: gsm8k_to_r1_zero of each GSM8K record"),
    Twin("course_lib.logprobs:entropy_from_logits", "compute_entropy", "calls",
         "compute_entropy over (B, T, V) logits, a block of rows at a time"),
    Twin("course_lib.rollouts.mismatch_atlas:full_forward", "get_response_log_probs", "calls",
         "notebook 15's trainer forward: get_response_log_probs's log-probs, a micro-batch of rows at a time"),
    Twin("course_lib.training.evaluation:evaluate", "evaluate", "calls",
         "the trainers' evaluation of records and models: the graded evaluate, a chunk of examples at a time"),
)


def twins_of(name: str, handled: tuple[str, ...] = HANDLINGS) -> list[Twin]:
    """The twins of graded name `name` handled one of the ways `handled` names, in TWINS's order."""
    return [t for t in TWINS if t.of == name and t.handled in handled]


def tripwire(suite: ModuleType) -> list[str]:
    """The course_lib names a runner of `suite` trips on: its TRIPWIRE (default: its graded name),
    then its graded function's "tripwire" twins."""
    names = list(getattr(suite, "TRIPWIRE", [suite.GRADED]))
    return names + [t.name for t in twins_of(suite.GRADED, ("tripwire",)) if t.name not in names]


def stubbed(assignment: str | None, extra: list = ()) -> list:
    """The `autograder.assignments.Graded` entries the stubbed course_lib of `assignment` stubs: every
    graded name open there (`open_names`; None: every one), `extra` (names of no lesson), and the
    "stub" twins of them (their `twin_of` set)."""
    from .assignments import Graded, open_names

    names = open_names(assignment)
    known = {g.name for g in names}
    names += [g for g in extra if g.name not in known]
    twins = [Graded(g.assignment, t.module, t.name, twin_of=g.name) for g in names for t in twins_of(g.name, ("stub",))]
    return names + twins


def suite_view(suite: ModuleType, assignment: str | None = None) -> tuple[list, list[str]]:
    """(stubbed, tripwire) of a runner of `suite` while `assignment` is graded: the stubbed course_lib of
    the earlier of the suite's assignment and `assignment`; a suite whose function no lesson grades yet
    has every graded name stubbed, its own function and its tripwire too."""
    import course_lib

    from .assignments import Graded, assignment_of

    own = assignment_of(suite.GRADED)
    wire = tripwire(suite)
    extra = []
    if own is None:
        for name in dict.fromkeys([suite.GRADED, *wire]):
            obj = getattr(course_lib, name, None)
            if obj is not None and hasattr(obj, "__module__"):
                extra.append(Graded("", obj.__module__, name))
    target = min(a for a in (own, assignment) if a) if (own or assignment) else None
    return stubbed(target, extra), wire


def check_declaration() -> list[str]:
    """What is wrong with TWINS, one sentence each (empty when nothing is): an unknown handling, a
    twin of no graded name, one that is not a top-level function of course_lib, a "tripwire" twin in a
    module `import course_lib` does not load (the runner replaces names in the loaded modules), a
    "calls" twin that does not call its graded function."""
    import importlib
    import inspect

    from .assignments import registry, unassigned

    graded = {g.name: g for g in registry() + unassigned()}
    problems = []
    for t in TWINS:
        where = f"TWINS entry {t.ref}"
        if t.handled not in HANDLINGS:
            problems.append(f"{where}: handled {t.handled!r} is not one of {', '.join(HANDLINGS)}")
        if t.of not in graded:
            problems.append(f"{where}: {t.of!r} is no graded name")
            continue
        try:
            fn = getattr(importlib.import_module(t.module), t.name)
        except (ImportError, AttributeError):
            problems.append(f"{where}: no such function")
            continue
        if not inspect.isfunction(fn) or fn.__module__ != t.module:
            problems.append(f"{where}: not a function defined at the top of {t.module}")
        if t.handled == "tripwire" and t.module.count(".") != 1:
            problems.append(f"{where}: a tripwire twin must be in a top-level module of course_lib (loaded by "
                            "`import course_lib`, where the runner replaces it)")
        if t.handled == "calls":
            target = getattr(importlib.import_module(graded[t.of].module), t.of)
            if not calls(fn, target):
                problems.append(f"{where}: it does not call {t.of} (handled 'calls')")
    return problems


def calls(fn, target) -> bool:
    """Whether `fn` reaches `target` itself: a global name of its module (under any alias) that is
    `target`, read in its body or a nested function or comprehension of it, or a default argument."""
    import inspect
    import sys

    fn = inspect.unwrap(fn)  # a decorated function (torch.no_grad) reads its globals in the function it wraps
    module = sys.modules[fn.__module__]
    defaults = list(fn.__defaults__ or ()) + list((fn.__kwdefaults__ or {}).values())
    if any(d is target for d in defaults):
        return True
    codes, names = [fn.__code__], set()
    while codes:
        code = codes.pop()
        names |= set(code.co_names)
        codes += [c for c in code.co_consts if hasattr(c, "co_names")]
    return any(getattr(module, n, None) is target for n in names)
