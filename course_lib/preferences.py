"""Preference pairs for DPO (notebook 12): which response is chosen, which rejected.

A pair is {"prompt", "chosen", "rejected", "ground_truth"}: two responses to one r1_zero prompt
(the text after "Assistant: <think>"), the first preferred. Two sources:

- on-policy: the policy's own samples, a group per question, graded by the reward function:
  chosen a response graded correct, rejected one graded wrong (`on_policy_pairs`);
- off-policy: the data alone: the gold solution against the same solution with the number in
  its answer block changed (`off_policy_pairs`), a rejected response the policy may never write.
"""

from __future__ import annotations

from typing import Callable

ANSWER_OPEN, ANSWER_CLOSE = "<answer>", "</answer>"


def on_policy_pairs(reward_fn: Callable[[str, str], dict], prompts: list[str], responses: list[str],
                    ground_truths: list[str], group_size: int, max_pairs_per_group: int = 1) -> list[dict]:
    """Pairs from groups of sampled responses: a correct one chosen, a wrong one rejected.

    Entries g*group_size .. (g+1)*group_size - 1 are group g: responses to one prompt with one
    ground truth. A response is correct when reward_fn(response, ground_truth)["reward"] == 1.0,
    wrong otherwise. In each group, in order of appearance and counting a repeated text once, the
    k-th distinct correct response is paired with the k-th distinct wrong one, for
    k < max_pairs_per_group; a group with no correct or no wrong response gives no pair (so
    group_size 1 gives none). A text counts once within its group only; pairs never cross groups.

    Returns:
        pairs in group order: {"prompt", "chosen", "rejected", "ground_truth"} (the group's).
    Raises:
        ValueError: prompts, responses and ground_truths of different lengths.
        ValueError: group_size < 1, or one that does not divide their length.
        ValueError: max_pairs_per_group < 1.
        ValueError: a group with different prompts or different ground truths.
    """
    n = len(responses)
    if len(prompts) != n or len(ground_truths) != n:
        raise ValueError(f"prompts ({len(prompts)}), responses ({n}) and ground_truths ({len(ground_truths)}) "
                         f"must have the same length")
    if group_size < 1 or n % group_size:
        raise ValueError(f"group_size ({group_size}) must be >= 1 and divide the {n} responses")
    if max_pairs_per_group < 1:
        raise ValueError(f"max_pairs_per_group must be >= 1, got {max_pairs_per_group}")
    pairs = []
    for start in range(0, n, group_size):
        group = range(start, start + group_size)
        for name, values in (("prompts", prompts), ("ground_truths", ground_truths)):
            if len({values[i] for i in group}) != 1:
                raise ValueError(f"{name}: group {start // group_size} (entries {start}..{start + group_size - 1}) "
                                 f"holds different values; a group is one question")
        correct, wrong = [], []
        for i in group:
            text = responses[i]
            if text in correct or text in wrong:
                continue
            (correct if reward_fn(text, ground_truths[i])["reward"] == 1.0 else wrong).append(text)
        for chosen, rejected in list(zip(correct, wrong))[:max_pairs_per_group]:
            pairs.append({"prompt": prompts[start], "chosen": chosen, "rejected": rejected,
                          "ground_truth": ground_truths[start]})
    return pairs


def off_policy_pairs(examples: list[dict]) -> list[dict]:
    """Pairs from worked solutions: the gold output against it with its final answer changed.

    For an r1_zero record {"prompt", "output", "ground_truth"} whose ground truth is an integer
    n: chosen = the output; rejected = the output with the text inside its last
    "<answer> ... </answer>" block replaced by " {n + 1} " (whatever spacing or text the block
    held), the text before and after it kept. The reasoning is left as it is, so the pair differs
    in the answer alone.

    Returns:
        one pair per example, in order: {"prompt", "chosen", "rejected", "ground_truth"} (the
        ground truth stripped; no other field is copied).
    Raises:
        ValueError: a record that lacks a field (prompt, output or ground_truth).
        ValueError: a ground truth that is not an integer (3.5 is not rounded).
        ValueError: an output without a closed <answer> ... </answer> block.
    """
    pairs = []
    for i, ex in enumerate(examples):
        missing = [f for f in ("prompt", "output", "ground_truth") if f not in ex]
        if missing:
            raise ValueError(f"example {i}: no {', '.join(map(repr, missing))} field")
        output, truth = ex["output"], str(ex["ground_truth"]).strip()
        try:
            wrong = int(truth) + 1
        except ValueError:
            raise ValueError(f"example {i}: ground_truth {truth!r} is not an integer") from None
        start = output.rfind(ANSWER_OPEN)
        end = output.find(ANSWER_CLOSE, start + len(ANSWER_OPEN)) if start >= 0 else -1
        if end < 0:
            raise ValueError(f"example {i}: output has no '<answer> ... </answer>' block")
        rejected = f"{output[:start + len(ANSWER_OPEN)]} {wrong} {output[end:]}"
        pairs.append({"prompt": ex["prompt"], "chosen": output, "rejected": rejected, "ground_truth": truth})
    return pairs
