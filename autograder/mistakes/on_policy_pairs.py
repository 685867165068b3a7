"""The known mistakes of `on_policy_pairs` (notebook 12): the catalogue `autograder.mistakes` describes."""

from __future__ import annotations

from autograder.mistakes import Mistake, edited


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
