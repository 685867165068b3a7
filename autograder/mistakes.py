"""The catalogue of known mistakes: for each graded function, the realistic ways students get it wrong.

A graded function's grader.py (`autograder/graded/<suite>/grader.py`) holds its catalogue next to
its correct versions, in this shape (`compute_grpo_clip_loss`):

    MISTAKES = {
        "ratio_inverted": Mistake(
            "computes the ratio as pi_old / pi_theta, exp(old - new), instead of pi_theta / pi_old",
            edited(MINIMUM, (RATIO, "ratio = torch.exp(old_log_probs - policy_log_probs)")),
            ["mixed_advantages_B4_T9_eps0.2"]),
    }

Each mistake has a public name (the key: an identifier), one sentence a student reads, the code
that makes it (a notebook cell defining the graded function, often a correct version with one
edit: `edited`) and the hidden cases it must fail on every draw. Both the tests
(`tests/test_graded.py`: each mistake loses points, and the judge names it) and the case
generator (`autograder.signatures`: each mistake's outputs on each case, so that the judge can
recognise it in a student's failing function) read it.

Names and sentences are public: the judge shows them to a student whose function behaves as the
mistake does. The code is grader-only: neither grader.py nor this module is ever copied into a
student kit or the grading sandbox (`autograder.harness` copies the KERNEL_SIDE modules and the
folders' harnesses only; `autograder.kit`'s leak check proves that no line of a mistake's code is
in a kit).
"""

from __future__ import annotations

import importlib
import re
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

FOLDERS = Path(__file__).resolve().parent / "graded"  # one per graded function
NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
SENTENCE_CHARS = 200  # one sentence a student reads, not a paragraph


@dataclass(frozen=True)
class Mistake:
    """One known mistake of a graded function (its name is its key in the suite's MISTAKES).

    sentence: what is wrong, in one sentence a student reads ("divides by every position, not by
        the response tokens"); shown beside the name when the judge recognises the mistake.
    source: a notebook cell's source defining the graded function with this mistake (grader-only).
    cases: the hidden cases it must fail on every draw (the tests hold it to them).
    recognisable: whether recognition can name it from its outputs; False for a mistake whose wrong
        outputs are not reproducible (memory left uninitialised holds whatever it held), for one that
        fails only where its own rounding holds the truth (no case tells it from a correct function:
        `autograder.signatures`), and for one that raises on every case asking for no error (an
        exception's class, or the tripwire, is no evidence of this mistake: `autograder.recognition`).
        The judge never names it (it still loses its points)."""

    sentence: str
    source: str
    cases: list[str] = field(default_factory=list)
    recognisable: bool = True  # False where no output tells it (see above)


class CatalogueError(ValueError):
    """A catalogue that breaks the rules above (the message names the suite and the mistake)."""


def edited(base: str, *edits: tuple[str, str]) -> str:
    """`base` (a version's source) with each (old, new) replacement made in turn: a mistake stated as
    its edit of a correct version. Each `old` must occur exactly once in the text it is applied to
    (the base with the edits before it made), so that an edit can neither silently do nothing nor hit
    two places."""
    if not edits:
        raise CatalogueError("edited() without an edit: the base itself is not a mistake")
    text = base
    for i, (old, new) in enumerate(edits, 1):
        if not old:
            raise CatalogueError(f"edit {i} of {len(edits)}: an empty old string marks no place")
        first = text.find(old)
        if first < 0 or text.find(old, first + 1) >= 0:
            where = "does not occur" if first < 0 else "occurs more than once"
            raise CatalogueError(f"edit {i} of {len(edits)}: {old!r} {where} in the text it edits "
                                 f"(it must occur exactly once)")
        if new == old:
            raise CatalogueError(f"edit {i} of {len(edits)}: {old!r} is replaced by itself")
        text = text[:first] + new + text[first + len(old):]
    return text


def function_from(source: str, name: str):
    """The function `name` defined by `source` as if in a notebook cell (module __main__), so that
    it pickles by value, exactly as a student's cell."""
    namespace = {"__name__": "__main__"}
    exec(compile(textwrap.dedent(source), f"<{name}>", "exec"), namespace)
    return namespace[name]


def has_catalogue(suite: str) -> bool:
    return (FOLDERS / suite / "grader.py").is_file()


def catalogue(suite: str) -> dict[str, Mistake]:
    """The known mistakes of `suite` ({} when it has no grader.py), checked against the rules of
    this module's docstring."""
    if not has_catalogue(suite):
        return {}
    mistakes = getattr(importlib.import_module(f"autograder.graded.{suite}.grader"), "MISTAKES", None)
    if not isinstance(mistakes, dict):
        raise CatalogueError(f"autograder/graded/{suite}/grader.py must define MISTAKES = {{name: Mistake(...)}}")
    for name, m in mistakes.items():
        where = f"autograder/graded/{suite}/grader.py, mistake {name!r}"
        if not isinstance(name, str) or not NAME.match(name):
            raise CatalogueError(f"{where}: a name is an identifier (letters, digits, underscores)")
        if not isinstance(m, Mistake):
            raise CatalogueError(f"{where}: not a Mistake(sentence, source, cases)")
        if not m.sentence or "\n" in m.sentence or len(m.sentence) > SENTENCE_CHARS or m.sentence.endswith("."):
            raise CatalogueError(f"{where}: the sentence is one line of at most {SENTENCE_CHARS} characters, "
                                 "without a final full stop")
        if not m.cases or not all(isinstance(c, str) for c in m.cases):
            raise CatalogueError(f"{where}: name the hidden cases it must fail")
    return mistakes


def catalogue_files() -> list[str]:
    """The suites whose folder has a grader.py (and so a catalogue)."""
    return sorted(p.parent.name for p in FOLDERS.glob("*/grader.py") if not p.parent.name.startswith("_"))
