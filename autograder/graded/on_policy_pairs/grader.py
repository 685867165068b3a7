"""The grader's side of `on_policy_pairs` (notebook 12): how its hidden cases are drawn, the correct
versions that must earn full marks and the known mistakes that must lose them, each with the
sentence a student reads (`autograder.mistakes`). Never in a student kit or the grading sandbox,
which hold the folder's __init__.py only.

Hidden cases of `on_policy_pairs(reward_fn, prompts, responses, ground_truths, group_size,
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

import torch

from autograder.mistakes import edited, Mistake


# ---------------------------------------------------------------- the hidden cases
# each error case and the phrase of the reference's `Raises:` section that states it (tests/test_contracts.py)
RAISES = {
    "error_lengths_differ": "prompts, responses and ground_truths of different lengths",
    "error_fewer_prompts": "prompts, responses and ground_truths of different lengths",
    "error_group_size_does_not_divide": "one that does not divide their length",
    "error_group_size_does_not_divide_one_question": "one that does not divide their length",
    "error_group_of_two_prompts": "a group with different prompts",
    "error_group_of_two_ground_truths": "different ground truths",
}


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


# ---------------------------------------------------------------- the correct versions
BASE = """
    def on_policy_pairs(reward_fn, prompts, responses, ground_truths, group_size, max_pairs_per_group=1):
        if not (len(prompts) == len(responses) == len(ground_truths)):
            raise ValueError("prompts, responses and ground_truths differ in length")
        if group_size < 1 or len(responses) % group_size != 0:
            raise ValueError("group_size must divide the number of responses")
        pairs = []
        for start in range(0, len(responses), group_size):
            stop = start + group_size
            if len(set(prompts[start:stop])) != 1 or len(set(ground_truths[start:stop])) != 1:
                raise ValueError("a group must share one prompt and one ground truth")
            correct, wrong, seen = [], [], set()
            for response in responses[start:stop]:
                if response in seen:
                    continue
                seen.add(response)
                if reward_fn(response, ground_truths[start])["reward"] == 1.0:
                    correct.append(response)
                else:
                    wrong.append(response)
            for k in range(min(len(correct), len(wrong), max_pairs_per_group)):
                pairs.append({"prompt": prompts[start], "chosen": correct[k], "rejected": wrong[k],
                              "ground_truth": ground_truths[start]})
        return pairs
"""

REWARD = 'if reward_fn(response, ground_truths[start])["reward"] == 1.0:'

PAIR = """            for k in range(min(len(correct), len(wrong), max_pairs_per_group)):
                pairs.append({"prompt": prompts[start], "chosen": correct[k], "rejected": wrong[k],
                              "ground_truth": ground_truths[start]})"""

SEEN = """                if response in seen:
                    continue
"""

MIXED = ["mixed_groups_default_max_pairs", "wrong_first_in_every_group"]


CORRECT = {
    "loop_with_a_seen_set": BASE,
    # distinct texts with dict.fromkeys, then two comprehensions and a sliced zip
    "fromkeys_and_zip": """
        def on_policy_pairs(reward_fn, prompts, responses, ground_truths, group_size, max_pairs_per_group=1):
            n = len(responses)
            if len(prompts) != n or len(ground_truths) != n:
                raise ValueError("lengths differ")
            if group_size <= 0 or n % group_size:
                raise ValueError("bad group_size")
            out = []
            for g in range(n // group_size):
                sl = slice(g * group_size, (g + 1) * group_size)
                group_prompts, group_truths = set(prompts[sl]), set(ground_truths[sl])
                if len(group_prompts) > 1 or len(group_truths) > 1:
                    raise ValueError(f"group {g} mixes questions")
                prompt, truth = prompts[sl][0], ground_truths[sl][0]
                distinct = list(dict.fromkeys(responses[sl]))
                graded = [(r, reward_fn(r, truth)["reward"] == 1.0) for r in distinct]
                good = [r for r, ok in graded if ok]
                bad = [r for r, ok in graded if not ok]
                out += [dict(prompt=prompt, chosen=c, rejected=r, ground_truth=truth)
                        for c, r in list(zip(good, bad))[:max_pairs_per_group]]
            return out
    """,
    # itertools: islice of the zip, groups by index arithmetic
    "itertools_islice": """
        from itertools import islice
        def on_policy_pairs(reward_fn, prompts, responses, ground_truths, group_size, max_pairs_per_group=1):
            if len({len(prompts), len(responses), len(ground_truths)}) != 1:
                raise ValueError("prompts, responses, ground_truths: not the same length")
            if not isinstance(group_size, int) or group_size < 1 or len(responses) % group_size != 0:
                raise ValueError("group_size does not divide the batch")
            result = []
            groups = [range(i, i + group_size) for i in range(0, len(responses), group_size)]
            for idx in groups:
                if any(prompts[i] != prompts[idx[0]] or ground_truths[i] != ground_truths[idx[0]] for i in idx):
                    raise ValueError("group with different prompts or ground truths")
                correct, wrong = [], []
                for i in idx:
                    text = responses[i]
                    if text in correct or text in wrong:
                        continue
                    r = reward_fn(text, ground_truths[i])
                    (correct if r["reward"] == 1.0 else wrong).append(text)
                for c, w in islice(zip(correct, wrong), max_pairs_per_group):
                    result.append({"prompt": prompts[idx[0]], "chosen": c, "rejected": w, "ground_truth": ground_truths[idx[0]]})
            return result
    """,
    # two pointers over the group, each reward computed once per distinct text (a dict as the cache)
    "two_pointers_reward_cache": """
        def on_policy_pairs(reward_fn, prompts, responses, ground_truths, group_size, max_pairs_per_group=1):
            N = len(responses)
            if N != len(prompts) or N != len(ground_truths):
                raise ValueError("length mismatch")
            if group_size < 1 or N % group_size:
                raise ValueError("group_size")
            pairs = []
            g = 0
            while g < N:
                block = list(zip(prompts[g:g + group_size], responses[g:g + group_size], ground_truths[g:g + group_size]))
                if len({p for p, _, _ in block}) != 1:
                    raise ValueError("prompts differ in a group")
                if len({t for _, _, t in block}) != 1:
                    raise ValueError("ground_truths differ in a group")
                prompt, truth = block[0][0], block[0][2]
                grade = {}
                for _, r, _ in block:
                    if r not in grade:
                        grade[r] = reward_fn(r, truth)["reward"] == 1.0
                order = list(grade)
                i = j = made = 0
                while made < max_pairs_per_group:
                    while i < len(order) and not grade[order[i]]:
                        i += 1
                    while j < len(order) and grade[order[j]]:
                        j += 1
                    if i == len(order) or j == len(order):
                        break
                    pairs.append({"prompt": prompt, "chosen": order[i], "rejected": order[j], "ground_truth": truth})
                    i, j, made = i + 1, j + 1, made + 1
                g += group_size
            return pairs
    """,
}

# the fresh draws of the cases the many-draws check holds every version to (tests/test_graded.py; 40 by default)
DRAWS = 10


# ---------------------------------------------------------------- the known mistakes
MISTAKES = {
    # chosen the first wrong response, rejected the first correct one
    "wrong_chosen_correct_rejected": Mistake(
        "makes the wrong response the chosen one and the correct one the rejected one",
        edited(BASE, ('"chosen": correct[k], "rejected": wrong[k]',
                                                        '"chosen": wrong[k], "rejected": correct[k]')),
        MIXED),
    # the first two responses of the group, whatever their grades
    "first_two_responses_of_the_group": Mistake(
        "pairs the first two responses of a group whatever their rewards",
        edited(BASE, (PAIR, """            group = list(dict.fromkeys(responses[start:stop]))
            if correct and wrong:
                pairs.append({"prompt": prompts[start], "chosen": group[0], "rejected": group[1],
                              "ground_truth": ground_truths[start]})""")),
        ["wrong_first_in_every_group"]),
    "duplicates_not_removed": Mistake(
        "counts a repeated response text more than once instead of once",
        edited(BASE, (SEEN, "")),
        ["repeated_texts_counted_once_max_3", "repeated_texts_max_pairs_2"]),
    # one seen set for the whole batch: a text in two groups counts in the first alone
    "duplicates_removed_across_groups": Mistake(
        "removes repeated texts across the whole batch, so a text in two groups counts in the first only",
        edited(BASE, ("correct, wrong, seen = [], [], set()", "correct, wrong = [], []"),
                                                    ("        pairs = []\n", "        pairs, seen = [], set()\n")),
        ["same_text_in_two_groups"]),
    # the batch pooled: every correct response against every wrong one, the groups ignored
    "pairs_across_groups": Mistake(
        "pools the batch, pairing correct and wrong responses of different groups",
        """
        def on_policy_pairs(reward_fn, prompts, responses, ground_truths, group_size, max_pairs_per_group=1):
            if not (len(prompts) == len(responses) == len(ground_truths)) or len(responses) % group_size:
                raise ValueError("bad lengths")
            for s in range(0, len(responses), group_size):
                if len(set(prompts[s:s + group_size])) != 1 or len(set(ground_truths[s:s + group_size])) != 1:
                    raise ValueError("a group holds two questions")
            correct, wrong = [], []
            for i, r in enumerate(responses):
                if any(r == x for _, x in correct + wrong):
                    continue
                (correct if reward_fn(r, ground_truths[i])["reward"] == 1.0 else wrong).append((i, r))
            n_pairs = max_pairs_per_group * (len(responses) // group_size)
            return [{"prompt": prompts[i], "chosen": c, "rejected": w, "ground_truth": ground_truths[i]}
                    for (i, c), (_, w) in list(zip(correct, wrong))[:n_pairs]]
    """,
        ["mixed_groups_default_max_pairs", "only_correct_and_only_wrong_groups"]),
    "max_pairs_ignored": Mistake(
        "ignores max_pairs_per_group",
        edited(BASE, ("min(len(correct), len(wrong), max_pairs_per_group)", "min(len(correct), len(wrong))")),
        ["mixed_groups_default_max_pairs", "max_pairs_2_one_group_of_6"]),
    "default_max_pairs_unbounded": Mistake(
        "makes max_pairs_per_group unbounded by default instead of 1",
        edited(BASE, ("max_pairs_per_group=1", "max_pairs_per_group=None"),
                                               ("min(len(correct), len(wrong), max_pairs_per_group)",
                                                "min(len(correct), len(wrong), max_pairs_per_group or len(correct))")),
        ["wrong_first_in_every_group"]),
    # every correct response against the group's first wrong one
    "every_correct_with_the_first_wrong": Mistake(
        "pairs every correct response with the group's first wrong one instead of pairing them in order",
        edited(BASE, ('"rejected": wrong[k]', '"rejected": wrong[0]')),
        ["max_pairs_3_more_correct_than_wrong", "max_pairs_2_one_group_of_6"]),
    # all (correct, wrong) combinations, the first max_pairs_per_group of them
    "combinations_of_correct_and_wrong": Mistake(
        "takes the first (correct, wrong) combinations instead of pairing the k-th correct with the k-th wrong",
        edited(BASE, (PAIR, """            from itertools import product
            for chosen, rejected in list(product(correct, wrong))[:max_pairs_per_group]:
                pairs.append({"prompt": prompts[start], "chosen": chosen, "rejected": rejected,
                              "ground_truth": ground_truths[start]})""")),
        ["max_pairs_3_more_correct_than_wrong", "max_pairs_3_more_wrong_than_correct"]),
    # partial credit (0.5) taken as correct
    "reward_above_0_is_correct": Mistake(
        "counts any reward above 0 (partial credit) as correct instead of a reward of 1",
        edited(BASE, (REWARD, 'if reward_fn(response, ground_truths[start])["reward"] > 0:')),
        ["custom_reward_partial_credit_is_wrong", "custom_reward_default_max_pairs"]),
    # r1_zero_reward_fn's answer_reward: the caller's reward has no such key
    "answer_reward_read": Mistake(
        "reads the answer_reward key, which the given reward_fn may not return, instead of reward",
        edited(BASE, (REWARD, 'if reward_fn(response, ground_truths[start])["answer_reward"] == 1.0:')),
        ["custom_reward_partial_credit_is_wrong"]),
    "reward_arguments_swapped": Mistake(
        "calls reward_fn(ground_truth, response) instead of reward_fn(response, ground_truth)",
        edited(BASE, (REWARD, 'if reward_fn(ground_truths[start], response)["reward"] == 1.0:')),
        ["mixed_groups_default_max_pairs", "custom_reward_default_max_pairs"]),
    # graded by the answer's text alone: "88.0" and a broken format with the right number differ from the truth
    "string_match_instead_of_the_reward": Mistake(
        "grades by matching the answer's text instead of calling reward_fn",
        edited(BASE, (REWARD, 'if f"<answer> {ground_truths[start]} </answer>" in response:')),
        ["max_pairs_3_more_correct_than_wrong", "custom_reward_default_max_pairs"]),
    # distinct texts in sorted order, not in order of appearance
    "sorted_instead_of_in_order": Mistake(
        "takes the distinct texts in sorted order instead of in order of appearance",
        edited(BASE, ("for response in responses[start:stop]:",
                                                     "for response in sorted(responses[start:stop]):")),
        ["wrong_first_in_every_group"]),
    "group_checks_missing": Mistake(
        "accepts a group that mixes prompts or ground truths instead of raising ValueError",
        edited(BASE, ("""            if len(set(prompts[start:stop])) != 1 or len(set(ground_truths[start:stop])) != 1:
                raise ValueError("a group must share one prompt and one ground truth")
""", "")),
        ["error_group_of_two_prompts", "error_group_of_two_ground_truths"]),
    # zip over the three lists: the longer ones cut silently
    "lengths_not_checked": Mistake(
        "accepts prompts, responses and ground truths of different lengths instead of raising ValueError",
        edited(BASE, ("""        if not (len(prompts) == len(responses) == len(ground_truths)):
            raise ValueError("prompts, responses and ground_truths differ in length")
""", "")),
        ["error_lengths_differ"]),
    # a last, shorter group
    "group_size_not_checked": Mistake(
        "accepts a group_size that does not divide the batch instead of raising ValueError",
        edited(BASE, ("if group_size < 1 or len(responses) % group_size != 0:", "if group_size < 1:")),
        ["error_group_size_does_not_divide_one_question"]),
}
