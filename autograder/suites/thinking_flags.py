"""Hidden cases of `thinking_flags(n, thinking_ratio, generator) -> list[bool]` (notebook 13): which of
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

GRADED = "thinking_flags"
# each error case and the phrase of the reference's `Raises:` section that states it (tests/test_contracts.py)
RAISES = {
    "error_ratio_negative": "thinking_ratio outside [0, 1]",
    "error_ratio_above_1": "thinking_ratio outside [0, 1]",
    "error_ratio_a_percentage": "a percentage such as 50 too",
}


def make_inputs(gen: torch.Generator) -> list[tuple[str, dict]]:
    from ._thinking_texts import draw_int

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


def call(fn, inputs: dict) -> dict:
    generator = torch.Generator().manual_seed(inputs["seed"])
    if inputs["expect_error"]:
        try:
            fn(inputs["n"], inputs["thinking_ratio"], generator)
        except Exception as e:  # noqa: BLE001 - which exception is the output
            return {"raises": "ValueError" if isinstance(e, ValueError) else "other"}
        return {"raises": None}
    flags = fn(inputs["n"], inputs["thinking_ratio"], generator)
    return {"flags": flags, "next_draws": torch.rand(3, generator=generator)}
