"""Hidden cases of `on_policy_pairs(reward_fn, prompts, responses, ground_truths, group_size,
max_pairs_per_group=1) -> list[dict]` (notebook 12): in each group of group_size consecutive
entries (one prompt, one ground truth), in order of appearance and each distinct text once, the
k-th response graded correct (reward_fn(response, ground_truth)["reward"] == 1.0) paired with the
k-th graded wrong, for k < max_pairs_per_group.

The responses are r1_zero continuations of arithmetic questions: the gold output, the same value
written otherwise ("39.0", a bare answer), a changed answer, a well-formed wrong answer, a broken
format holding the right number, no tags at all. The reward function is `course_lib`'s
`r1_zero_reward_fn` or, in the `custom_reward_*` cases, the caller's `last_number_reward`: 1.0
when the response's last number is the ground truth, 0.5 when the ground truth is one of its
other numbers, 0.0 otherwise; it returns {"reward"} alone and is not symmetric in its two
arguments. Outputs are exact: the list of pairs (dicts of strings). Error cases must raise
ValueError (or a subclass); their output is {"raises": "ValueError"}, {"raises": "other"} (another
exception) or {"raises": None}.

What the cases are built to catch: the first wrong response chosen instead of the first correct
one (and wrong responses before the correct ones in `wrong_first_*`), repeated texts not removed
(`repeated_texts_*`) or removed across groups (`same_text_in_two_groups`), pairs across groups
(the batch pooled), max_pairs_per_group ignored (every zipped pair) or taken as a total, every
correct response paired with the first wrong one or all combinations (`max_pairs_3_*`), a
reward above 0 taken as correct or another key of the reward read (`custom_reward_*`), the
reward function's arguments swapped, the default of max_pairs_per_group (cases that do not pass
it), pairs from groups without a correct or without a wrong response (`only_correct_and_only_wrong_groups`),
group_size 1 (no pair at all), and the errors: lists of different lengths, a group_size that does
not divide them, a group of two prompts or two ground truths.
"""

from __future__ import annotations

import re

import torch

GRADED = "on_policy_pairs"
# each error case and the phrase of the reference's `Raises:` section that states it (tests/test_contracts.py)
RAISES = {
    "error_lengths_differ": "prompts, responses and ground_truths of different lengths",
    "error_fewer_prompts": "prompts, responses and ground_truths of different lengths",
    "error_group_size_does_not_divide": "one that does not divide their length",
    "error_group_size_does_not_divide_one_question": "one that does not divide their length",
    "error_group_of_two_prompts": "a group with different prompts",
    "error_group_of_two_ground_truths": "different ground truths",
}


def last_number_reward(response: str, ground_truth: str) -> dict:
    """The caller's reward of the custom cases: {"reward": 1.0} when the response's last integer is the
    ground truth, 0.5 when the ground truth is one of its other integers, 0.0 otherwise."""
    numbers = re.findall(r"-?\d+", response)
    if numbers and numbers[-1] == ground_truth:
        return {"reward": 1.0}
    return {"reward": 0.5 if ground_truth in numbers else 0.0}


def make_inputs(gen: torch.Generator) -> list[tuple[str, dict]]:
    from course_lib import gsm8k_to_r1_zero, load_problems

    problems = load_problems("arith", "train")
    records = [gsm8k_to_r1_zero(problems[i]) for i in torch.randperm(len(problems), generator=gen)[:8].tolist()]

    def texts(r):
        """The responses to record r, by kind: c* graded correct by r1_zero_reward_fn, w* wrong."""
        n, out = int(r["ground_truth"]), r["output"]
        head = out[:out.rfind("<answer>")]
        return {
            "c1": out,
            "c2": f"{head}<answer> {n}.0 </answer>",  # the same value written otherwise
            "c3": f" it is {n}, then </think> <answer> {n} </answer>",
            "c4": f" I add them up and get {n}. </think> <answer> {n} </answer>",
            "w1": f"{head}<answer> {n + 1} </answer>",  # the answer changed
            "w2": f" I guess {n - 1}. </think> <answer> {n - 1} </answer>",
            "w3": out[:out.rfind("</answer>")],  # the right number, the format broken
            "w4": f" So I say the answer is {n}.",  # no tags at all
            "w5": f" {n} - 1 = {n - 1} </think> <answer> {n - 3} </answer>",
        }

    def batch(groups, group_size, max_pairs=None, reward="r1_zero", expect_error=False):
        """groups: [(record index, [kinds])]; each group is one record's prompt and ground truth."""
        prompts, responses, truths = [], [], []
        for i, kinds in groups:
            t = texts(records[i])
            responses += [t[k] if k in t else k for k in kinds]  # a kind not in t is the response text itself
            prompts += [records[i]["prompt"]] * len(kinds)
            truths += [records[i]["ground_truth"]] * len(kinds)
        return {"prompts": prompts, "responses": responses, "ground_truths": truths, "group_size": group_size,
                "max_pairs_per_group": max_pairs, "reward_fn": reward, "expect_error": expect_error}

    def custom(i):
        n = int(records[i]["ground_truth"])
        return [f" so it is {n + 2} or {n}", f" {n} or else {n + 1}", f" It is {n + 7}.", f" {n}? no: {n - 2}",
                f" Counting, {n}", f" {n + 1} then {n}"]

    shared = f" </think> <answer> {-int(torch.randint(1, 99, (), generator=gen))} </answer>"  # wrong in two groups
    mixed = batch([(0, ["c1", "w1", "c2", "w2"]), (1, ["w3", "c1", "w1", "c3"]), (2, ["c4", "c1", "w5", "w4"])], 4)
    one_group = batch([(3, ["w1", "c1", "w2", "c2", "w3", "c3"])], 6, max_pairs=2)
    broken = lambda b, **change: {**b, **change, "expect_error": True}  # noqa: E731
    two_prompts = batch([(4, ["c1", "w1"]), (5, ["c1", "w1"])], 2)
    two_prompts["prompts"][3] = records[6]["prompt"]
    two_truths = batch([(4, ["c1", "w1", "w2"]), (5, ["c1", "w1", "w2"])], 3)
    two_truths["ground_truths"][1] = str(int(two_truths["ground_truths"][1]) + 1)
    return [
        ("mixed_groups_default_max_pairs", mixed),
        ("mixed_groups_max_pairs_1_explicit", {**mixed, "max_pairs_per_group": 1}),
        ("wrong_first_in_every_group", batch([(3, ["w2", "w1", "c1", "c3"]), (4, ["w4", "c2", "w3", "c1"]),
                                              # sorted, " I add" < " it is" and " I guess" < " So": the
                                              # first of each kind in order is never the first in sorted order
                                              (5, ["w4", "w2", "c3", "c4"])], 4)),
        ("only_correct_and_only_wrong_groups", batch([(0, ["c1", "c2", "c3"]), (1, ["w1", "w2", "w3"]),
                                                      (2, ["w1", "c1", "c2"])], 3, max_pairs=3)),
        ("repeated_texts_counted_once_max_3", batch([(6, ["c1", "w1", "c1", "w1", "c2", "w2", "w2", "c3"])], 8, max_pairs=3)),
        ("repeated_texts_max_pairs_2", batch([(7, ["c1", "c1", "w1", "c2", "w1", "w2"]),
                                              (0, ["w1", "w1", "c1", "w2", "c1", "c2"])], 6, max_pairs=2)),
        ("max_pairs_3_more_correct_than_wrong", batch([(1, ["c1", "c2", "w1", "c3", "c4", "w2"]),
                                                       (2, ["w1", "c1", "w2", "w3", "c2", "w4"])], 6, max_pairs=3)),
        ("max_pairs_3_more_wrong_than_correct", batch([(3, ["w1", "w2", "c1", "w3", "w4", "c2", "w5", "c3"])], 8,
                                                      max_pairs=3)),
        ("max_pairs_2_one_group_of_6", one_group),
        ("same_text_in_two_groups", batch([(4, ["c1", shared, "w1"]), (5, [shared, "c2", "c1"])], 3, max_pairs=2)),
        ("group_size_1_gives_no_pair", batch([(0, ["c1"]), (0, ["w1"]), (1, ["c1"]), (2, ["w2"])], 1)),
        ("custom_reward_partial_credit_is_wrong", batch([(5, custom(5)[:4]), (6, custom(6)[2:])], 4, max_pairs=2,
                                                        reward="last_number")),
        ("custom_reward_default_max_pairs", batch([(7, custom(7)[::-1]), (0, custom(0))], 6, reward="last_number")),
        ("error_lengths_differ", broken(mixed, ground_truths=mixed["ground_truths"][:-1])),
        ("error_fewer_prompts", broken(mixed, prompts=mixed["prompts"][:8])),
        ("error_group_size_does_not_divide", broken(mixed, group_size=5)),
        # one question throughout: a last, shorter group of the same prompt would pass every other check
        ("error_group_size_does_not_divide_one_question", batch([(3, ["c1", "w1", "c2", "w2", "c3", "w3"])], 4,
                                                                expect_error=True)),
        ("error_group_of_two_prompts", broken(two_prompts)),
        ("error_group_of_two_ground_truths", broken(two_truths)),
    ]


def call(fn, inputs: dict) -> dict:
    from course_lib import r1_zero_reward_fn

    reward_fn = {"r1_zero": r1_zero_reward_fn, "last_number": last_number_reward}[inputs["reward_fn"]]
    args = (reward_fn, list(inputs["prompts"]), list(inputs["responses"]), list(inputs["ground_truths"]),
            inputs["group_size"])
    kwargs = {} if inputs["max_pairs_per_group"] is None else {"max_pairs_per_group": inputs["max_pairs_per_group"]}
    if inputs["expect_error"]:
        try:
            fn(*args, **kwargs)
        except Exception as e:  # noqa: BLE001 - which exception is the output
            return {"raises": "ValueError" if isinstance(e, ValueError) else "other"}
        return {"raises": None}
    return {"pairs": fn(*args, **kwargs)}
