"""The known mistakes of `off_policy_pairs` (notebook 12): the catalogue `autograder.mistakes` describes."""

from __future__ import annotations

from autograder.mistakes import Mistake, edited


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
