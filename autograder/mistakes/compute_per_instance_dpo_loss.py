"""The known mistakes of `compute_per_instance_dpo_loss` (notebook 12): the catalogue `autograder.mistakes` describes."""

from __future__ import annotations

from autograder.mistakes import Mistake, edited


# the notebook's path: the student's own sequence_log_probs and dpo_loss, a batch of two rows laid out
# as tokenize_prompt_and_output lays them out (prompt and response tokenized apart, padded on the right)
BASE = """
    import torch
    import torch.nn.functional as F
    from course_lib import format_r1_zero_prompt
    def sequence_log_probs(model, input_ids, labels, response_mask, average=False):
        logits = model(input_ids).logits
        lp = torch.log_softmax(logits.to(torch.promote_types(logits.dtype, torch.float32)), dim=-1)
        lp = lp.gather(-1, labels[..., None]).squeeze(-1)
        total = torch.where(response_mask, lp, torch.zeros_like(lp)).sum(-1)
        return total / response_mask.sum(-1) if average else total
    def dpo_loss(pc, pr, rc, rr, beta):
        margins = beta * ((pc - rc.detach()) - (pr - rr.detach()))
        return -F.logsigmoid(margins).mean(), {}
    def compute_per_instance_dpo_loss(lm, lm_ref, tokenizer, beta, prompt, response_chosen, response_rejected):
        if any(p.requires_grad for p in lm_ref.parameters()):
            raise ValueError("lm_ref must be frozen")
        if tokenizer.eos_token is None:
            raise ValueError("no eos token")
        if response_chosen == "" or response_rejected == "":
            raise ValueError("empty response")
        if response_chosen == response_rejected:
            raise ValueError("identical responses")
        prompt_ids = tokenizer(format_r1_zero_prompt(prompt), add_special_tokens=False)["input_ids"]
        outputs = [tokenizer(r + tokenizer.eos_token, add_special_tokens=False)["input_ids"]
                   for r in (response_chosen, response_rejected)]
        width = max(len(prompt_ids) + len(o) for o in outputs)
        full = torch.full((2, width), tokenizer.pad_token_id, dtype=torch.long)
        is_out = torch.zeros((2, width), dtype=torch.bool)
        for i, o in enumerate(outputs):
            full[i, :len(prompt_ids) + len(o)] = torch.tensor(prompt_ids + o)
            is_out[i, len(prompt_ids):len(prompt_ids) + len(o)] = True
        input_ids, labels, mask = full[:, :-1], full[:, 1:], is_out[:, 1:]
        device = next(lm.parameters()).device
        policy = sequence_log_probs(lm, input_ids.to(device), labels.to(device), mask.to(device))
        with torch.no_grad():
            ref_device = next(lm_ref.parameters()).device
            ref = sequence_log_probs(lm_ref, input_ids.to(ref_device), labels.to(ref_device), mask.to(ref_device)).to(device)
        loss, _ = dpo_loss(policy[:1], policy[1:], ref[:1], ref[1:], beta)
        return loss
"""

OUTPUTS = """        outputs = [tokenizer(r + tokenizer.eos_token, add_special_tokens=False)["input_ids"]
                   for r in (response_chosen, response_rejected)]"""

NORMAL = ["gold_vs_changed_answer_beta_0.1", "lengths_differ_gold_vs_short", "far_reference_beta_1"]

MISTAKES = {
    # the end of a response is part of what is preferred
    "no_eos_appended": Mistake(
        "scores the responses without the eos token appended, though the end of a response is part of what is preferred",
        edited(BASE, ("tokenizer(r + tokenizer.eos_token, add", "tokenizer(r, add")),
        NORMAL),
    "question_not_in_the_template": Mistake(
        "scores the responses after the bare question instead of the question in the r1_zero prompt template",
        edited(BASE, ("tokenizer(format_r1_zero_prompt(prompt), add", "tokenizer(prompt, add")),
        NORMAL),
    # the reference's log-probs taken from the policy: every margin 0, every loss log 2
    "reference_scored_by_the_policy": Mistake(
        "takes the reference's log-probs from the policy: every margin is 0 and every loss log 2",
        edited(BASE, ("ref = sequence_log_probs(lm_ref, ", "ref = sequence_log_probs(lm, ")),
        NORMAL),
    "chosen_and_rejected_swapped": Mistake(
        "scores the chosen response as the rejected one and the rejected one as the chosen one",
        edited(BASE, ("for r in (response_chosen, response_rejected)]",
                                                      "for r in (response_rejected, response_chosen)]")),
        NORMAL),
    # a length-normalised score (SimPO's) where DPO sums
    "mean_over_tokens": Mistake(
        "averages the response log-probs over tokens where DPO sums them",
        edited(BASE, ("policy = sequence_log_probs(lm, input_ids.to(device), labels.to(device), mask.to(device))",
                                           "policy = sequence_log_probs(lm, input_ids.to(device), labels.to(device), mask.to(device), True)"),
                                    ("mask.to(ref_device)).to(device)", "mask.to(ref_device), True).to(device)")),
        NORMAL),
    # every label position after the prompt, the shorter row's padding included
    "padding_counted": Mistake(
        "counts every position after the prompt, the shorter response's padding included",
        edited(BASE, ("is_out[i, len(prompt_ids):len(prompt_ids) + len(o)] = True",
                                          "is_out[i, len(prompt_ids):] = True")),
        ["lengths_differ_gold_vs_short", "lengths_differ_short_vs_rambling",
         "lengths_differ_gold_vs_format_broken", "lengths_differ_broken_chosen_vs_gold"]),
    "beta_outside_the_logsigmoid": Mistake(
        "multiplies the loss by beta instead of the margin inside the logsigmoid",
        edited(BASE, ("margins = beta * ((pc - rc.detach()) - (pr - rr.detach()))\n"
                                                      "        return -F.logsigmoid(margins).mean(), {}",
                                                      "margins = (pc - rc.detach()) - (pr - rr.detach())\n"
                                                      "        return -beta * F.logsigmoid(margins).mean(), {}")),
        ["gold_vs_changed_answer_beta_0.1", "gold_vs_changed_answer_beta_0.5"]),
    # no gradient reaches the policy: DPO would train nothing
    "policy_scored_without_grad": Mistake(
        "scores the policy under no_grad, so no gradient reaches it",
        edited(BASE, ("policy = sequence_log_probs(lm, ",
                                                     "with torch.no_grad():\n"
                                                     "            policy = sequence_log_probs(lm, ")),
        ["policy_equals_reference_first_step", "gold_vs_changed_answer_beta_0.1"],
        # it raises on every case that asks for no error (RuntimeError in backward: no graph):
        # an exception's class alone is no evidence of this mistake, so recognition cannot name it
        recognisable=False),
    # the reference frozen quietly instead of refused
    "reference_frozen_instead_of_refused": Mistake(
        "freezes a reference that requires gradients instead of raising ValueError",
        edited(BASE, ("""        if any(p.requires_grad for p in lm_ref.parameters()):
            raise ValueError("lm_ref must be frozen")""", "        lm_ref.requires_grad_(False)")),
        ["error_reference_requires_grad"]),
    # "" + eos is one token, scored as if it were a response
    "empty_response_scored": Mistake(
        "scores an empty response instead of raising ValueError",
        edited(BASE, ("""        if response_chosen == "" or response_rejected == "":
            raise ValueError("empty response")
""", "")),
        ["error_empty_chosen", "error_empty_rejected"]),
    # a pair that prefers nothing: its loss is log 2 with a zero gradient
    "identical_responses_scored": Mistake(
        "scores two identical responses (a pair that prefers nothing) instead of raising ValueError",
        edited(BASE, ("""        if response_chosen == response_rejected:
            raise ValueError("identical responses")
""", "")),
        ["error_identical_responses"]),
    # an eos of None appended as "" (or as a None id: a TypeError), instead of a ValueError
    "missing_eos_not_refused": Mistake(
        "appends nothing (or fails otherwise) for a tokenizer without an eos token instead of raising ValueError",
        edited(BASE, ("""        if tokenizer.eos_token is None:
            raise ValueError("no eos token")
""", ""), (OUTPUTS, """        outputs = [tokenizer(r + (tokenizer.eos_token or ""), add_special_tokens=False)["input_ids"]
                   for r in (response_chosen, response_rejected)]""")),
        ["error_tokenizer_without_eos"]),
}
