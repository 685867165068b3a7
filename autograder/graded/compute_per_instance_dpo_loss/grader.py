"""The grader's side of `compute_per_instance_dpo_loss` (notebook 12): how its hidden cases are drawn,
the correct versions that must earn full marks and the known mistakes that must lose them, each with
the sentence a student reads (`autograder.mistakes`). Never in a student kit or the grading sandbox,
which hold the folder's __init__.py only.

Hidden cases of `compute_per_instance_dpo_loss(lm, lm_ref, tokenizer, beta, prompt, response_chosen,
response_rejected) -> ()` (notebook 12; CS336's signature): the DPO loss of one preference pair,

    -logsigmoid(beta * [(log pi(y_c | x) - log ref(y_c | x)) - (log pi(y_r | x) - log ref(y_r | x))])

with x the question in the course's r1_zero template and each response followed by the
tokenizer's eos token, its log-prob summed over its tokens.

The policy and the reference are small causal LMs built here from the case's float64 weights
(embedding -> causal running mean -> tanh -> output head over the course tokenizer's vocabulary),
the reference frozen (every parameter requires_grad False) and, in most cases, not the policy
(its weights moved by noise: a policy some steps into training). Prompts are questions of the
arithmetic training set; responses are their gold r1_zero outputs, the same outputs with the
answer changed (the off-policy rejections), and short and long responses, so that the two rows
of a pair differ in length. Outputs: the loss, the gradients of the policy's parameters, whether
any reference parameter got a gradient and whether the reference's parameters are unchanged.
Error cases must raise ValueError (or a subclass); their output is {"raises": "ValueError"},
{"raises": "other"} (another exception) or {"raises": None}.

What the cases are built to catch: no eos appended, the question not put into the r1_zero
template, the reference scored by the policy (every loss log 2), chosen and rejected swapped,
the mean over tokens where DPO sums them, padding counted (`*_lengths_differ_*`), beta outside
the logsigmoid, the policy scored without gradient (`policy_equals_reference_*`: the first step,
loss log 2 and a gradient nonetheless); and the errors: identical responses, an empty response
(the eos alone would be scored), a reference that requires gradients, a tokenizer without an eos
token.

The expected values are the reference's on the float64 models. The loss is a difference of sums
of about a hundred log-probs each (several hundred nats), so its rounding is that of those sums,
not of the loss: the tolerance is measured from PERTURB (the weights' rounding carried through the
reference) and from two grader-only VARIANTS: each sequence scored alone without padding, and the
reference's four sums each moved by one unit of their rounding in the direction that moves the
margin most (a correct sum in another order lands a unit or so away; probes that all
happen to agree to the last bits would otherwise leave a tolerance no other order could meet).

In the notebook this cell calls the student's own `sequence_log_probs` and `dpo_loss` (the
course_lib ones are a tripwire while grading), so every version below brings its helpers along;
none calls an earlier notebook's graded function either (in the judge they may be stubs), only
the course's r1_zero template.
"""

from __future__ import annotations

import torch

from autograder.graded.compute_per_instance_dpo_loss import _tokenizer
from autograder.mistakes import edited, Mistake


# ---------------------------------------------------------------- the hidden cases
# each error case and the phrase of the reference's `Raises:` section that states it (tests/test_contracts.py)
RAISES = {
    "error_identical_responses": "identical chosen and rejected responses",
    "error_empty_chosen": "an empty response",
    "error_empty_rejected": "an empty response",
    "error_reference_requires_grad": "lm_ref with a parameter that requires gradients",
    "error_tokenizer_without_eos": "a tokenizer without an eos token",
}
PERTURB = True  # the weights' rounding carried through the loss (autograder.cases.perturb)
# grader-only: another batching, and the four sums one unit of rounding away (what another order of summation shows)
VARIANTS = ["autograder.graded.compute_per_instance_dpo_loss.grader:variant_row_by_row",
            "autograder.graded.compute_per_instance_dpo_loss.grader:variant_sums_one_ulp_apart"]


def make_inputs(gen: torch.Generator) -> list[tuple[str, dict]]:
    from course_lib import gsm8k_to_r1_zero, load_problems, off_policy_pairs

    problems = load_problems("arith", "train")
    picked = [problems[i] for i in torch.randperm(len(problems), generator=gen)[:8].tolist()]
    records = [gsm8k_to_r1_zero(p) for p in picked]
    rejections = [pair["rejected"] for pair in off_policy_pairs(records)]
    vocab = len(_tokenizer())

    def number():
        return int(torch.randint(2, 99, (), generator=gen))

    def case(i, chosen, rejected, beta=0.1, ref_noise=0.3, tokenizer="course", ref_requires_grad=False,
             expect_error=False, H=8):
        emb = torch.randn(vocab, H, generator=gen, dtype=torch.float64) * 0.5
        head = torch.randn(vocab, H, generator=gen, dtype=torch.float64) * 0.5
        # the reference: the policy's starting point, the policy moved away from it by noise
        ref_emb = emb + ref_noise * torch.randn(vocab, H, generator=gen, dtype=torch.float64)
        ref_head = head + ref_noise * torch.randn(vocab, H, generator=gen, dtype=torch.float64)
        return {"embedding": emb, "head": head, "ref_embedding": ref_emb, "ref_head": ref_head, "beta": beta,
                "prompt": picked[i]["question"], "response_chosen": chosen, "response_rejected": rejected,
                "tokenizer": tokenizer, "ref_requires_grad": ref_requires_grad, "expect_error": expect_error}

    gold = [r["output"] for r in records]
    a = number()
    short = f" {a} </think> <answer> {a} </answer>"
    rambling = f" I think the answer is {a + 1}. Let me check: {a + 1} is close. </think> <answer> {a + 1} </answer>"
    broken = f" I reckon it is {a + 2}, no block"  # no answer block at all: a format failure
    return [
        ("gold_vs_changed_answer_beta_0.1", case(0, gold[0], rejections[0])),
        ("gold_vs_changed_answer_beta_0.5", case(1, gold[1], rejections[1], beta=0.5)),
        ("gold_vs_changed_answer_beta_0.01", case(2, gold[2], rejections[2], beta=0.01)),
        ("gold_vs_changed_answer_beta_2", case(3, gold[3], rejections[3], beta=2.0)),
        ("lengths_differ_gold_vs_short", case(4, gold[4], short)),
        ("lengths_differ_short_vs_rambling", case(5, short, rambling, beta=0.2)),
        ("lengths_differ_gold_vs_format_broken", case(6, gold[6], broken)),
        ("lengths_differ_broken_chosen_vs_gold", case(7, broken, gold[7], beta=0.3)),
        ("policy_equals_reference_first_step", case(0, gold[0], rejections[0], ref_noise=0.0)),
        ("far_reference_beta_1", case(5, gold[5], rejections[5], beta=1.0, ref_noise=1.0)),
        ("error_identical_responses", case(1, gold[1], gold[1], expect_error=True)),
        ("error_empty_chosen", case(2, "", rejections[2], expect_error=True)),
        ("error_empty_rejected", case(3, gold[3], "", expect_error=True)),
        ("error_reference_requires_grad", case(4, gold[4], rejections[4], ref_requires_grad=True, expect_error=True)),
        ("error_tokenizer_without_eos", case(6, gold[6], rejections[6], tokenizer="no_eos", expect_error=True)),
    ]


def variant_pair_batch(lm_ref, tokenizer, prompt, response_chosen, response_rejected) -> dict:
    """Grader-only, the variants' shared part: the contract's ValueErrors, then rows 0 (chosen) and 1
    (rejected) as tokenize_prompt_and_output lays them out, each response ended by eos."""
    from course_lib import format_r1_zero_prompt, tokenize_prompt_and_output

    if any(p.requires_grad for p in lm_ref.parameters()):
        raise ValueError("lm_ref requires gradients")
    if tokenizer.eos_token is None or not response_chosen or not response_rejected \
            or response_chosen == response_rejected:
        raise ValueError("no eos token, an empty response or identical responses")
    text = format_r1_zero_prompt(prompt)
    return tokenize_prompt_and_output([text, text], [response_chosen + tokenizer.eos_token,
                                                     response_rejected + tokenizer.eos_token], tokenizer)


def variant_row_by_row(lm, lm_ref, tokenizer, beta, prompt, response_chosen, response_rejected):
    """Grader-only: each sequence scored alone (its padding cut off), log_softmax and gather, the
    policies subtracted first, softplus."""
    import torch.nn.functional as F

    batch = variant_pair_batch(lm_ref, tokenizer, prompt, response_chosen, response_rejected)

    def score(model):
        out = []
        for ids, labels, mask in zip(batch["input_ids"], batch["labels"], batch["response_mask"]):
            n = int(mask.nonzero().max()) + 1
            lp = torch.log_softmax(model(ids[None, :n]).logits[0], dim=-1).gather(-1, labels[:n, None])[:, 0]
            out.append(lp[mask[:n]].sum())
        return out

    pi_c, pi_r = score(lm)
    with torch.no_grad():
        ref_c, ref_r = score(lm_ref)
    return F.softplus(-beta * ((pi_c - pi_r) - (ref_c - ref_r)))


def variant_sums_one_ulp_apart(lm, lm_ref, tokenizer, beta, prompt, response_chosen, response_rejected):
    """Grader-only: the reference's four summed log-probs, each moved one unit of its rounding (the
    policy's chosen up and rejected down, the reference's the other way: the margin moved most), as
    a correct sum in another order lands; the gradient left as it is."""
    from course_lib import dpo_loss, sequence_log_probs

    batch = variant_pair_batch(lm_ref, tokenizer, prompt, response_chosen, response_rejected)
    policy = sequence_log_probs(lm, **batch)
    with torch.no_grad():
        ref = sequence_log_probs(lm_ref, **batch)
    toward = torch.tensor([float("inf"), float("-inf")], dtype=policy.dtype)
    policy = policy + (torch.nextafter(policy.detach(), toward) - policy.detach())
    ref = torch.nextafter(ref, -toward)
    loss, _ = dpo_loss(policy[:1], policy[1:], ref[:1], ref[1:], beta)
    return loss


# ---------------------------------------------------------------- the correct versions
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


CORRECT = {
    "batch_of_two_like_the_course": BASE,
    # each sequence scored alone (no padding), eos as an id, softplus, the policies subtracted first
    "row_by_row_eos_id_softplus": """
        import torch
        import torch.nn.functional as F
        from course_lib import r1_zero_prompt_template
        def response_log_prob(model, prompt_ids, response_ids):
            ids = torch.tensor([prompt_ids + response_ids], device=next(model.parameters()).device)
            logits = model(ids[:, :-1]).logits[0]
            lp = logits.log_softmax(dim=-1)
            start = len(prompt_ids) - 1
            positions = torch.arange(start, start + len(response_ids), device=ids.device)
            return lp[positions, ids[0, start + 1:]].sum()
        def compute_per_instance_dpo_loss(lm, lm_ref, tokenizer, beta, prompt, response_chosen, response_rejected):
            if not response_chosen or not response_rejected:
                raise ValueError("a response is empty")
            if response_chosen == response_rejected:
                raise ValueError("chosen == rejected")
            if tokenizer.eos_token_id is None or tokenizer.eos_token is None:
                raise ValueError("tokenizer without eos")
            for p in lm_ref.parameters():
                if p.requires_grad:
                    raise ValueError("the reference must not require gradients")
            text = r1_zero_prompt_template().replace("{question}", prompt)
            p_ids = tokenizer.encode(text, add_special_tokens=False)
            c_ids = tokenizer.encode(response_chosen, add_special_tokens=False) + [tokenizer.eos_token_id]
            r_ids = tokenizer.encode(response_rejected, add_special_tokens=False) + [tokenizer.eos_token_id]
            pi_c, pi_r = response_log_prob(lm, p_ids, c_ids), response_log_prob(lm, p_ids, r_ids)
            with torch.no_grad():
                dev = pi_c.device
                ref_c, ref_r = response_log_prob(lm_ref, p_ids, c_ids).to(dev), response_log_prob(lm_ref, p_ids, r_ids).to(dev)
            return F.softplus(-beta * ((pi_c - pi_r) - (ref_c - ref_r)))
    """,
    # cross-entropy with ignore_index on the prompt and padding, in float64; the frozen reference scored
    # without no_grad (its parameters need none), its result detached
    "cross_entropy_ignore_index_float64": """
        import torch
        import torch.nn.functional as F
        from course_lib.gsm8k import format_r1_zero_prompt
        def summed_log_probs(model, full, response_start, lengths):
            logits = model(full[:, :-1]).logits.double()
            labels = full[:, 1:].clone()
            cols = torch.arange(labels.shape[1], device=labels.device)[None, :]
            keep = (cols >= response_start - 1) & (cols < lengths[:, None] - 1)
            labels[~keep] = -100
            nll = F.cross_entropy(logits.transpose(1, 2), labels, ignore_index=-100, reduction="none")
            return -nll.sum(dim=1)
        def compute_per_instance_dpo_loss(lm, lm_ref, tokenizer, beta, prompt, response_chosen, response_rejected):
            if tokenizer.eos_token is None:
                raise ValueError("tokenizer.eos_token is None")
            if any(p.requires_grad for p in lm_ref.parameters()):
                raise ValueError("lm_ref has parameters that require grad")
            if len(response_chosen) == 0 or len(response_rejected) == 0:
                raise ValueError("empty")
            if response_chosen == response_rejected:
                raise ValueError("same")
            prompt_ids = tokenizer(format_r1_zero_prompt(prompt), add_special_tokens=False).input_ids
            rows = [prompt_ids + tokenizer(r + tokenizer.eos_token, add_special_tokens=False).input_ids
                    for r in (response_chosen, response_rejected)]
            lengths = torch.tensor([len(r) for r in rows])
            full = torch.nn.utils.rnn.pad_sequence([torch.tensor(r) for r in rows], batch_first=True,
                                                   padding_value=tokenizer.pad_token_id)
            device, ref_device = next(lm.parameters()).device, next(lm_ref.parameters()).device
            pi = summed_log_probs(lm, full.to(device), len(prompt_ids), lengths.to(device))
            ref = summed_log_probs(lm_ref, full.to(ref_device), len(prompt_ids), lengths.to(ref_device)).detach().to(device)
            chosen, rejected = beta * (pi[0] - ref[0]), beta * (pi[1] - ref[1])
            return -F.logsigmoid(chosen - rejected).to(next(lm.parameters()).dtype)
    """,
}

# the fresh draws of the cases the many-draws check holds every version to (tests/test_graded.py; 40 by default)
DRAWS = 4


# ---------------------------------------------------------------- the known mistakes
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
