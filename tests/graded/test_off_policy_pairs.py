"""off_policy_pairs (notebook 12): the reference's contract, correct versions that earn full marks
through the real judge, and realistic mistakes that lose them (CONTRIBUTING.md, "Adding a graded
function")."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autograder.mistakes.off_policy_pairs import BASE
from course_lib import gsm8k_to_r1_zero, off_policy_pairs, r1_zero_reward_fn
from tests.helpers import PROPERTY_SETTINGS, corpus_tests, many_draws_test, problems

SUITE = "off_policy_pairs"

words = st.text(alphabet=st.sampled_from(list("abc xyz=+-*.,\n0123456789")), max_size=30)


# ---------------------------------------------------------------- the reference
def test_reference_on_gold_records_changes_the_answer_alone_and_makes_it_wrong():
    records = [gsm8k_to_r1_zero(p) for p in problems(30)]
    pairs = off_policy_pairs(records)
    assert len(pairs) == len(records)
    for rec, pair in zip(records, pairs):
        assert set(pair) == {"prompt", "chosen", "rejected", "ground_truth"}
        assert (pair["prompt"], pair["chosen"], pair["ground_truth"]) == (rec["prompt"], rec["output"], rec["ground_truth"])
        head = rec["output"][:rec["output"].rfind("<answer>")]
        assert pair["rejected"] == f"{head}<answer> {int(rec['ground_truth']) + 1} </answer>"
        assert r1_zero_reward_fn(pair["chosen"], pair["ground_truth"])["reward"] == 1.0
        assert r1_zero_reward_fn(pair["rejected"], pair["ground_truth"])["reward"] == 0.0


@settings(PROPERTY_SETTINGS, max_examples=60)
@given(words, words, words, words, st.integers(-10**6, 10**6), st.sampled_from(["", " ", "\n", "  \t"]))
def test_reference_replaces_the_inside_of_the_last_block(before, first, between, after, n, pad):
    output = f"{before}<answer>{first}</answer>{between} </think> <answer>{pad}{n}{pad}</answer>{after}"
    (pair,) = off_policy_pairs([{"prompt": "P", "output": output, "ground_truth": f" {n} "}])
    assert pair["rejected"] == f"{before}<answer>{first}</answer>{between} </think> <answer> {n + 1} </answer>{after}"
    assert pair["chosen"] == output and pair["ground_truth"] == str(n)


def test_reference_errors_name_the_example():
    good = {"prompt": "P", "output": " </think> <answer> 4 </answer>", "ground_truth": "4"}
    with pytest.raises(ValueError, match="example 1: output has no"):
        off_policy_pairs([good, {**good, "output": " </think> 4"}])
    with pytest.raises(ValueError, match="example 0: output has no"):
        off_policy_pairs([{**good, "output": " </think> <answer> 4"}])
    with pytest.raises(ValueError, match="not an integer"):
        off_policy_pairs([{**good, "ground_truth": "3.5"}])
    with pytest.raises(ValueError, match="'output'"):
        off_policy_pairs([{"prompt": "P", "ground_truth": "4"}])
    assert off_policy_pairs([]) == []


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


test_correct_version_earns_full_marks, test_mistake_loses_its_points = corpus_tests(SUITE, CORRECT)
test_each_version_holds_on_many_draws = many_draws_test(SUITE, CORRECT, draws=10)
