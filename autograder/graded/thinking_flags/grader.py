"""The grader's side of `thinking_flags` (notebook 13): how its hidden cases are drawn, the correct
versions that must earn full marks and the known mistakes that must lose them, each with the
sentence a student reads (`autograder.mistakes`). Never in a student kit or the grading sandbox,
which hold the folder's __init__.py only.

Hidden cases of `thinking_flags(n, thinking_ratio, generator) -> list[bool]` (notebook 13): which of
n RL prompts are rolled out in thinking mode: flag i is True iff u[i] < thinking_ratio, u =
torch.rand(n, generator=generator).

Each case seeds a fresh generator; thinking_ratio is a multiple of 1/64 (exact in float32 and
float64), 0, 1, or, in `ratio_equal_to_a_draw`, one of the case's draws itself. Outputs are exact:
{"flags"} and {"next_draws"}, the generator's next 3 draws after the call, which show how many
numbers the function drew (they must be n). Error cases must raise ValueError (or a subclass):
{"raises": "ValueError"}, "other" (another exception) or None.

What the cases are built to catch: the flags inverted (True for a direct answer) or drawn against
1 - thinking_ratio, `<=` instead of `<`, one draw shared by every prompt, the generator ignored or
draws in another dtype, a tensor returned instead of a list of
bools, n = 0 and n = 1, and thinking_ratio below 0 or above 1.
"""

from __future__ import annotations

import torch

from autograder.graded._thinking_texts import draw_int
from autograder.mistakes import edited, Mistake


# ---------------------------------------------------------------- the hidden cases
# each error case and the phrase of the reference's `Raises:` section that states it (tests/test_contracts.py)
RAISES = {
    "error_ratio_negative": "thinking_ratio outside [0, 1]",
    "error_ratio_above_1": "thinking_ratio outside [0, 1]",
    "error_ratio_a_percentage": "a percentage such as 50 too",
}


def make_inputs(gen: torch.Generator) -> list[tuple[str, dict]]:

    def case(n, ratio, expect_error=False, seed=None):
        return {"n": n, "thinking_ratio": ratio, "seed": draw_int(gen, 0, 2**31 - 1) if seed is None else seed,
                "expect_error": expect_error}

    tie_seed = draw_int(gen, 0, 2**31 - 1)
    tie_draws = torch.rand(12, generator=torch.Generator().manual_seed(tie_seed))
    return [
        ("half_of_16", case(16, 0.5)),
        ("quarter_of_48", case(48, 0.25)),
        ("drawn_ratio_of_32", case(32, draw_int(gen, 6, 59) / 64)),
        ("high_ratio_of_40", case(40, draw_int(gen, 52, 63) / 64)),
        ("low_ratio_of_40", case(40, draw_int(gen, 1, 12) / 64)),
        ("ratio_0_never_thinks", case(20, 0.0)),
        ("ratio_1_always_thinks", case(20, 1.0)),
        ("ratio_int_1", case(5, 1)),
        ("ratio_equal_to_a_draw", case(12, float(tie_draws[draw_int(gen, 0, 12)]), seed=tie_seed)),
        ("one_prompt", case(1, draw_int(gen, 16, 48) / 64)),
        ("no_prompts", case(0, 0.5)),
        ("error_ratio_negative", case(8, -draw_int(gen, 1, 64) / 64, expect_error=True)),
        ("error_ratio_above_1", case(8, 1 + draw_int(gen, 1, 64) / 64, expect_error=True)),
        ("error_ratio_a_percentage", case(8, 50, expect_error=True)),
    ]


# ---------------------------------------------------------------- the correct versions
BASE = """
    import torch
    def thinking_flags(n, thinking_ratio, generator):
        if not 0 <= thinking_ratio <= 1:
            raise ValueError(f"thinking_ratio must be in [0, 1], got {thinking_ratio}")
        u = torch.rand(n, generator=generator)
        return (u < thinking_ratio).tolist()
"""

RETURN = "return (u < thinking_ratio).tolist()"

DRAW = "u = torch.rand(n, generator=generator)"


CORRECT = {
    "vectorised_tolist": BASE,
    # a comprehension over Python floats
    "comprehension_over_floats": """
        import torch
        def thinking_flags(n, thinking_ratio, generator):
            if thinking_ratio < 0 or thinking_ratio > 1:
                raise ValueError("thinking_ratio outside [0, 1]")
            return [x < thinking_ratio for x in torch.rand(n, generator=generator).tolist()]
    """,
    # a loop of single draws, bool() of each comparison
    "a_draw_per_prompt": """
        import torch
        def thinking_flags(n, thinking_ratio, generator):
            if not (0.0 <= float(thinking_ratio) <= 1.0):
                raise ValueError(f"bad thinking_ratio {thinking_ratio}")
            flags = []
            for _ in range(n):
                flags.append(bool(torch.rand(1, generator=generator)[0] < thinking_ratio))
            return flags
    """,
    # the complement: a direct answer iff u >= thinking_ratio
    "not_of_direct": """
        import torch
        def thinking_flags(n, thinking_ratio, generator):
            if thinking_ratio < 0:
                raise ValueError("thinking_ratio < 0")
            if thinking_ratio > 1:
                raise ValueError("thinking_ratio > 1")
            direct = torch.rand(n, generator=generator) >= thinking_ratio
            return [not bool(d) for d in direct]
    """,
}

# the fresh draws of the cases the many-draws check holds every version to (tests/test_graded.py; 40 by default)
DRAWS = 20


# ---------------------------------------------------------------- the known mistakes
MISTAKES = {
    "flags_inverted": Mistake(
        "flags a prompt for thinking when its draw is at least thinking_ratio, the wrong way round",
        edited(BASE, (RETURN, "return (u >= thinking_ratio).tolist()")),
        ["half_of_16", "ratio_0_never_thinks", "ratio_1_always_thinks"]),
    "against_one_minus_the_ratio": Mistake(
        "compares the draws with 1 - thinking_ratio instead of thinking_ratio",
        edited(BASE, (RETURN, "return (u < 1 - thinking_ratio).tolist()")),
        ["quarter_of_48", "ratio_0_never_thinks", "ratio_1_always_thinks"]),
    "le_instead_of_lt": Mistake(
        "flags a draw equal to thinking_ratio (<= instead of <)",
        edited(BASE, (RETURN, "return (u <= thinking_ratio).tolist()")),
        ["ratio_equal_to_a_draw"]),
    # one draw decides the mode of every prompt
    "one_draw_for_every_prompt": Mistake(
        "draws one number for all prompts instead of one per prompt",
        edited(BASE, (DRAW, "u = torch.rand(1, generator=generator).expand(n)")),
        ["half_of_16", "quarter_of_48"]),
    "generator_ignored": Mistake(
        "draws from torch's global generator instead of the generator it is given",
        edited(BASE, (DRAW, "u = torch.rand(n)")),
        ["half_of_16", "quarter_of_48"]),
    "draws_in_float64": Mistake(
        "draws the numbers in float64 instead of torch.rand's default float32",
        edited(BASE, (DRAW, "u = torch.rand(n, generator=generator, dtype=torch.float64)")),
        ["half_of_16", "quarter_of_48"]),
    "a_tensor_returned": Mistake(
        "returns a tensor of flags instead of a list of bools",
        edited(BASE, (RETURN, "return u < thinking_ratio")),
        ["half_of_16", "ratio_1_always_thinks"]),
    "ratio_not_checked": Mistake(
        "accepts thinking_ratio outside [0, 1] instead of raising ValueError",
        edited(BASE, ("""        if not 0 <= thinking_ratio <= 1:
            raise ValueError(f"thinking_ratio must be in [0, 1], got {thinking_ratio}")
""", "")),
        ["error_ratio_negative", "error_ratio_above_1", "error_ratio_a_percentage"]),
    # a ratio above 1 clamped instead of refused
    "ratio_clamped": Mistake(
        "clamps a thinking_ratio outside [0, 1] instead of raising ValueError",
        edited(BASE, ("""        if not 0 <= thinking_ratio <= 1:
            raise ValueError(f"thinking_ratio must be in [0, 1], got {thinking_ratio}")
""", """        thinking_ratio = min(max(thinking_ratio, 0.0), 1.0)
""")),
        ["error_ratio_negative", "error_ratio_above_1"]),
}
