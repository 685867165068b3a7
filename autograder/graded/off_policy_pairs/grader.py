"""The grader's side of `off_policy_pairs` (notebook 12): how its hidden cases are drawn, the correct
versions that must earn full marks and the known mistakes that must lose them, each with the
sentence a student reads (`autograder.mistakes`). Never in a student kit or the grading sandbox,
which hold the folder's __init__.py only.

Hidden cases of `off_policy_pairs(examples) -> list[dict]` (notebook 12): for each r1_zero record
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

from autograder.mistakes import edited, Mistake


# ---------------------------------------------------------------- the hidden cases
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


# ---------------------------------------------------------------- the correct versions
BASE = """
    def off_policy_pairs(examples):
        pairs = []
        for i, ex in enumerate(examples):
            for field in ("prompt", "output", "ground_truth"):
                if field not in ex:
                    raise ValueError(f"example {i} has no {field}")
            output = ex["output"]
            truth = str(ex["ground_truth"]).strip()
            try:
                n = int(truth)
            except ValueError:
                raise ValueError(f"ground truth {truth!r} is not an integer")
            start = output.rfind("<answer>")
            if start < 0:
                raise ValueError("no answer block")
            start += len("<answer>")
            end = output.find("</answer>", start)
            if end < 0:
                raise ValueError("answer block not closed")
            rejected = output[:start] + f" {n + 1} " + output[end:]
            pairs.append({"prompt": ex["prompt"], "chosen": output, "rejected": rejected, "ground_truth": truth})
        return pairs
"""

REJ = 'rejected = output[:start] + f" {n + 1} " + output[end:]'

FIND = 'start = output.rfind("<answer>")'


CORRECT = {
    "rfind_and_slices": BASE,
    "rpartition": """
        def off_policy_pairs(examples):
            out = []
            for ex in examples:
                missing = {"prompt", "output", "ground_truth"} - set(ex)
                if missing:
                    raise ValueError(f"missing {sorted(missing)}")
                gt = str(ex["ground_truth"]).strip()
                if not gt.lstrip("+-").isdigit():
                    raise ValueError(f"ground_truth {gt!r} is no integer")
                head, sep, tail = ex["output"].rpartition("<answer>")
                if not sep:
                    raise ValueError("no <answer>")
                _, close, rest = tail.partition("</answer>")
                if not close:
                    raise ValueError("no </answer> after the last <answer>")
                out.append({"prompt": ex["prompt"], "chosen": ex["output"],
                            "rejected": head + sep + " " + str(int(gt) + 1) + " " + close + rest, "ground_truth": gt})
            return out
    """,
    # the last of all non-overlapping blocks, found by a regex; ints parsed by hand
    "regex_finditer_last_match": """
        import re
        BLOCK = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)
        def off_policy_pairs(examples):
            result = []
            for idx, example in enumerate(examples):
                try:
                    prompt, output, truth = example["prompt"], example["output"], example["ground_truth"]
                except KeyError as e:
                    raise ValueError(f"example {idx}: missing field {e}") from None
                truth = str(truth).strip()
                if re.fullmatch(r"[+-]?\\d+", truth) is None:
                    raise ValueError(f"example {idx}: ground truth {truth!r} is not an integer")
                matches = list(BLOCK.finditer(output))
                if not matches:
                    raise ValueError(f"example {idx}: no answer block")
                last = matches[-1]
                rejected = output[:last.start(1)] + " %d " % (int(truth) + 1) + output[last.end(1):]
                result.append(dict(prompt=prompt, chosen=output, rejected=rejected, ground_truth=truth))
            return result
    """,
    # one substitution: a greedy prefix up to the last <answer>, then the shortest inside
    "greedy_prefix_regex_sub": """
        import re
        def off_policy_pairs(examples):
            pairs = []
            for ex in examples:
                if not all(k in ex for k in ("prompt", "output", "ground_truth")):
                    raise ValueError("an example lacks a field")
                gt = str(ex["ground_truth"]).strip()
                try:
                    wrong = int(gt) + 1
                except ValueError as e:
                    raise ValueError("non-integer ground truth") from e
                rejected, count = re.subn(r"\\A(.*<answer>).*?(</answer>)", lambda m: f"{m.group(1)} {wrong} {m.group(2)}",
                                          ex["output"], count=1, flags=re.DOTALL)
                if count != 1:
                    raise ValueError("no <answer> ... </answer> in the output")
                pairs.append({"prompt": ex["prompt"], "chosen": ex["output"], "rejected": rejected, "ground_truth": gt})
            return pairs
    """,
}

# the fresh draws of the cases the many-draws check holds every version to (tests/test_graded.py; 40 by default)
DRAWS = 10


# ---------------------------------------------------------------- the known mistakes
MISTAKES = {
    "first_block_changed": Mistake(
        "changes the first <answer> block instead of the last",
        edited(BASE, (FIND, 'start = output.find("<answer>")')),
        ["several_answer_blocks_the_last_changed", "several_answer_blocks_in_a_real_record"]),
    "every_block_changed": Mistake(
        "changes every <answer> block instead of the last one only",
        """
        import re
        def off_policy_pairs(examples):
            pairs = []
            for ex in examples:
                if not all(k in ex for k in ("prompt", "output", "ground_truth")):
                    raise ValueError("missing field")
                gt = str(ex["ground_truth"]).strip()
                n = int(gt)
                if "<answer>" not in ex["output"] or "</answer>" not in ex["output"]:
                    raise ValueError("no answer block")
                rejected = re.sub(r"<answer>.*?</answer>", f"<answer> {n + 1} </answer>", ex["output"], flags=re.S)
                pairs.append({"prompt": ex["prompt"], "chosen": ex["output"], "rejected": rejected, "ground_truth": gt})
            return pairs
    """,
        ["several_answer_blocks_the_last_changed", "several_answer_blocks_in_a_real_record"]),
    # <answer>.*</answer>, greedy: from the first block's start to the last block's end, the reasoning between lost
    "greedy_match_over_every_block": Mistake(
        "matches <answer>.*</answer> greedily, from the first block's start to the last one's end, losing what lies between",
        """
        import re
        def off_policy_pairs(examples):
            pairs = []
            for ex in examples:
                if not all(k in ex for k in ("prompt", "output", "ground_truth")):
                    raise ValueError("missing field")
                gt = str(ex["ground_truth"]).strip()
                n = int(gt)
                rejected, found = re.subn(r"<answer>.*</answer>", f"<answer> {n + 1} </answer>", ex["output"], flags=re.S)
                if not found:
                    raise ValueError("no answer block")
                pairs.append({"prompt": ex["prompt"], "chosen": ex["output"], "rejected": rejected, "ground_truth": gt})
            return pairs
    """,
        ["several_answer_blocks_the_last_changed", "several_answer_blocks_in_a_real_record"]),
    # str.replace on the whole output: the reasoning's copies of the number change too
    "number_replaced_everywhere": Mistake(
        "replaces the number everywhere in the output, the reasoning's copies included",
        edited(BASE, (REJ, "rejected = output.replace(truth, str(n + 1))")),
        ["arith_records", "several_answer_blocks_the_last_changed"]),
    "n_minus_1": Mistake(
        "writes n - 1 instead of n + 1 as the wrong answer",
        edited(BASE, (REJ, 'rejected = output[:start] + f" {n - 1} " + output[end:]')),
        ["arith_records", "negative_answers"]),
    "spaces_dropped": Mistake(
        "drops the spaces around the wrong answer inside the block",
        edited(BASE, (REJ, 'rejected = output[:start] + f"{n + 1}" + output[end:]')),
        ["arith_records"]),
    # the block rewritten from scratch: what follows it is lost
    "text_after_the_block_dropped": Mistake(
        "drops the text after the answer block",
        edited(BASE, (REJ, 'rejected = output[:start] + f" {n + 1} </answer>"')),
        ["text_after_the_block"]),
    # the number in the block, not the ground truth: "1,080" does not parse, "88.0" neither
    "answer_read_from_the_block": Mistake(
        "reads the answer from the block instead of the ground truth",
        edited(BASE, (REJ, 'rejected = output[:start] + f" {int(output[start:end]) + 1} " + output[end:]')),
        ["block_differs_from_ground_truth"]),
    # only the number's own characters swapped inside the block: its whitespace kept as it was
    "block_whitespace_kept": Mistake(
        "keeps the block's own whitespace instead of writing ' n + 1 '",
        edited(BASE, (REJ, "rejected = output[:start] + output[start:end].replace(truth, str(n + 1)) "
                                                     "+ output[end:]")),
        ["whitespace_inside_the_block"]),
    "extra_fields_copied": Mistake(
        "copies the example's other fields into the pair",
        edited(BASE, ('pairs.append({"prompt": ex["prompt"], ',
                                              'pairs.append({**{k: v for k, v in ex.items() if k != "output"}, "prompt": ex["prompt"], ')),
        ["extra_fields_stay_out_of_the_pair"]),
    # a missing field reaches ex[...] as a KeyError
    "missing_field_is_a_key_error": Mistake(
        "reads a missing field as ex[...], which raises KeyError instead of ValueError",
        edited(BASE, ("""            for field in ("prompt", "output", "ground_truth"):
                if field not in ex:
                    raise ValueError(f"example {i} has no {field}")
""", "")),
        ["error_missing_output_field", "error_missing_ground_truth_field"]),
    # 3.5 becomes 4
    "float_ground_truth_accepted": Mistake(
        "accepts a non-integer ground truth (3.5 becomes 4) instead of raising ValueError",
        edited(BASE, ("n = int(truth)", "n = int(float(truth))")),
        ["error_ground_truth_3.5"]),
    # no block: the output itself as the rejected response (a pair that prefers nothing)
    "no_block_not_refused": Mistake(
        "uses the output itself as the rejected response when it has no answer block, instead of raising ValueError",
        edited(BASE, ("""            if start < 0:
                raise ValueError("no answer block")
            start += len("<answer>")
            end = output.find("</answer>", start)
            if end < 0:
                raise ValueError("answer block not closed")
            rejected = output[:start] + f" {n + 1} " + output[end:]""", """            end = output.find("</answer>", start)
            if start < 0 or end < 0:
                rejected = output
            else:
                start += len("<answer>")
                rejected = output[:start] + f" {n + 1} " + output[end:]""")),
        ["error_no_answer_block", "error_unclosed_answer_block"]),
}
