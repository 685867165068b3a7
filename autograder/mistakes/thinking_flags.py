"""The known mistakes of `thinking_flags` (notebook 13): the catalogue `autograder.mistakes` describes."""

from __future__ import annotations

from autograder.mistakes import Mistake, edited


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
