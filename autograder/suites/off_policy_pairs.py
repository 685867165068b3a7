"""Hidden cases of `off_policy_pairs(examples) -> list[dict]` (notebook 12): for each r1_zero record
{"prompt", "output", "ground_truth"} with an integer ground truth n, the pair {"prompt", "chosen":
the output, "rejected": the output with the inside of its last `<answer> ... </answer>` replaced by
" {n + 1} ", "ground_truth"}.

Outputs are exact: the list of pairs (dicts of strings). Error cases must raise ValueError (or a
subclass); their output is {"raises": "ValueError"}, {"raises": "other"} (another exception) or
{"raises": None}.

What the cases are built to catch: the first answer block changed instead of the last, every
block changed, a greedy match from the first `<answer>` to the last `</answer>` (the reasoning
between them lost) (`several_answer_blocks_*`); the number replaced everywhere in the output (the
reasoning's own copies of it: `arith_records`), n - 1 or another wrong number, the spaces around
it dropped, the text after the block dropped (`text_after_the_block`), the new answer taken from
the block's text instead of the ground truth (`block_differs_from_ground_truth`: "1,080" for
1080), a block's whitespace kept or required (`whitespace_inside_the_block`), negative and
multi-digit answers (a carry changes the length: 99 -> 100, -1 -> 0), extra fields copied into the
pair, and the errors: no answer block (and an unclosed one), a ground truth that is not an integer
(3.5 must not become 4), a missing field (a KeyError is not the ValueError asked for).
"""

from __future__ import annotations

import torch

GRADED = "off_policy_pairs"
# each error case and the phrase of the reference's `Raises:` section that states it (tests/test_contracts.py)
RAISES = {
    "error_no_answer_block": "an output without a closed <answer> ... </answer> block",
    "error_unclosed_answer_block": "an output without a closed <answer> ... </answer> block",
    "error_ground_truth_3.5": "a ground truth that is not an integer",
    "error_missing_output_field": "a record that lacks a field",
    "error_missing_ground_truth_field": "a record that lacks a field",
}


def make_inputs(gen: torch.Generator) -> list[tuple[str, dict]]:
    from course_lib import format_r1_zero_prompt, gsm8k_to_r1_zero, load_problems

    problems = load_problems("arith", "train")
    picked = [problems[i] for i in torch.randperm(len(problems), generator=gen)[:12].tolist()]
    records = [gsm8k_to_r1_zero(p) for p in picked]
    prompts = [r["prompt"] for r in records]
    k = int(torch.randint(11, 98, (), generator=gen))
    # an early block of record 7 never holds its answer + 1: changing every block would then change it to itself
    early = k + 1 if k == int(records[7]["ground_truth"]) + 1 else k

    def ex(i, output, truth):
        return {"prompt": prompts[i], "output": output, "ground_truth": truth}

    def case(examples, expect_error=False):
        return {"examples": examples, "expect_error": expect_error}

    several = [
        ex(5, f" First try: <answer> {k - 3} </answer> no, {k} - 3 is wrong. </think> <answer> {k} </answer>", str(k)),
        ex(6, f" <answer> 1 </answer> <answer> 2 </answer> so {k} </think> <answer> {k + 5} </answer>", str(k + 5)),
    ]
    return [
        ("arith_records", case([dict(r) for r in records[:5]])),
        ("several_answer_blocks_the_last_changed", case(several)),
        ("several_answer_blocks_in_a_real_record", case([ex(7, f" Maybe <answer> {early} </answer>?"
                                                               + records[7]["output"], records[7]["ground_truth"])])),
        ("negative_answers", case([ex(0, f" {k} - {k + 7} = -7 </think> <answer> -7 </answer>", "-7"),
                                   ex(1, f" {k} - {k + 1} = -1 </think> <answer> -1 </answer>", "-1")])),
        ("multi_digit_answers_and_carries", case([ex(2, f" {k} is not it: 90 + 9 = 99 </think> <answer> 99 </answer>", "99"),
                                                  ex(3, f" {k} * 100 </think> <answer> {k * 100 + 34} </answer>",
                                                     str(k * 100 + 34)),
                                                  ex(4, f" a million less one, not {k} </think> <answer> 999999 </answer>",
                                                     "999999")])),
        ("whitespace_inside_the_block", case([ex(8, f" so {k} </think> <answer>{k}</answer>", str(k)),
                                              ex(9, f" so {k} </think> <answer>\n{k}\n</answer>", str(k)),
                                              ex(10, f" so {k} </think> <answer>   {k}\t</answer>", str(k))])),
        ("block_differs_from_ground_truth", case([ex(11, f" 1000 + 80, as {k} said </think> <answer> 1,080 </answer>", "1080"),
                                                  ex(0, f" {k}.0 it is </think> <answer> {k}.0 </answer>", str(k))])),
        ("text_after_the_block", case([ex(1, f" {k} </think> <answer> {k} </answer>\nDone.", str(k)),
                                       ex(2, f" {k} </think> <answer> {k} </answer> <|endoftext|>", str(k))])),
        ("extra_fields_stay_out_of_the_pair", case([{**dict(records[3]), "question": picked[3]["question"],
                                                     "answer": picked[3]["answer"]}])),
        ("prompt_of_another_template", case([{"prompt": format_r1_zero_prompt(picked[4]["question"],
                                                                               "Q: {question}\nA: <think>"),
                                              "output": records[4]["output"], "ground_truth": records[4]["ground_truth"]}])),
        ("no_examples", case([])),
        ("error_no_answer_block", case([dict(records[0]), ex(1, f" It is {k}. </think> {k}", str(k))], True)),
        ("error_unclosed_answer_block", case([ex(2, f" It is {k}. </think> <answer> {k}", str(k))], True)),
        ("error_ground_truth_3.5", case([dict(records[1]), ex(3, f" 7 / 2, not {k} </think> <answer> 3.5 </answer>", "3.5")], True)),
        ("error_missing_output_field", case([dict(records[2]), {"prompt": prompts[4], "ground_truth": "4"}], True)),
        ("error_missing_ground_truth_field", case([{"prompt": prompts[5], "output": records[5]["output"]}], True)),
    ]


def call(fn, inputs: dict) -> dict:
    examples = [dict(e) for e in inputs["examples"]]
    if inputs["expect_error"]:
        try:
            fn(examples)
        except Exception as e:  # noqa: BLE001 - which exception is the output
            return {"raises": "ValueError" if isinstance(e, ValueError) else "other"}
        return {"raises": None}
    return {"pairs": fn(examples)}
