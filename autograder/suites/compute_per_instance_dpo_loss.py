"""Hidden cases of `compute_per_instance_dpo_loss(lm, lm_ref, tokenizer, beta, prompt, response_chosen,
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
"""

from __future__ import annotations

from types import SimpleNamespace

import torch

from autograder.suite_api import course_tokenizer

GRADED = "compute_per_instance_dpo_loss"
# each error case and the phrase of the reference's `Raises:` section that states it (tests/test_contracts.py)
RAISES = {
    "error_identical_responses": "identical chosen and rejected responses",
    "error_empty_chosen": "an empty response",
    "error_empty_rejected": "an empty response",
    "error_reference_requires_grad": "lm_ref with a parameter that requires gradients",
    "error_tokenizer_without_eos": "a tokenizer without an eos token",
}
# the notebook's two functions above this one are part of the exercise: calling the course_lib copies does not count
TRIPWIRE = ["compute_per_instance_dpo_loss", "sequence_log_probs", "dpo_loss"]
PERTURB = True  # the weights' rounding carried through the loss (autograder.cases.perturb)
# grader-only: another batching, and the four sums one unit of rounding away (what another order of summation shows)
VARIANTS = ["autograder.suites.compute_per_instance_dpo_loss:variant_row_by_row",
            "autograder.suites.compute_per_instance_dpo_loss:variant_sums_one_ulp_apart"]
WARM = ('transformers', 'tokenizers')  # imported by a judge runner started ahead (autograder.judge)


class TinyCausalLM(torch.nn.Module):
    """logits[b, t] = scale * head(tanh(mean of embeddings of tokens 0..t)): causal, differentiable."""

    def __init__(self, embedding: torch.Tensor, head: torch.Tensor, scale: float = 3.0):
        super().__init__()
        self.embedding = torch.nn.Parameter(embedding.clone())
        self.head = torch.nn.Parameter(head.clone())
        self.scale = scale

    def forward(self, input_ids, **kwargs):
        h = self.embedding[input_ids]  # (B, T, H)
        steps = torch.arange(1, input_ids.shape[1] + 1, dtype=h.dtype).view(1, -1, 1)
        h = torch.tanh(h.cumsum(dim=1) / steps)
        return SimpleNamespace(logits=self.scale * h @ self.head.T)  # (B, T, V)


_NO_EOS: list = []


def _tokenizer(kind: str = "course"):
    """The course tokenizer (shared); "no_eos": a copy of it whose eos_token is None, made once."""
    if kind == "course":
        return course_tokenizer()
    if not _NO_EOS:
        import copy

        _NO_EOS.append(copy.deepcopy(course_tokenizer()))
        _NO_EOS[0].eos_token = None
    return _NO_EOS[0]


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


def call(fn, inputs: dict) -> dict:
    tokenizer = _tokenizer(inputs["tokenizer"])
    lm = TinyCausalLM(inputs["embedding"], inputs["head"])
    lm_ref = TinyCausalLM(inputs["ref_embedding"], inputs["ref_head"]).requires_grad_(inputs["ref_requires_grad"])
    before = [p.detach().clone() for p in lm_ref.parameters()]
    args = (lm, lm_ref, tokenizer, inputs["beta"], inputs["prompt"], inputs["response_chosen"], inputs["response_rejected"])
    if inputs["expect_error"]:
        try:
            fn(*args)
        except Exception as e:  # noqa: BLE001 - which exception is the output
            return {"raises": "ValueError" if isinstance(e, ValueError) else "other"}
        return {"raises": None}
    loss = fn(*args)
    loss.backward()
    return {
        "loss": loss,
        "grad_embedding": lm.embedding.grad,
        "grad_head": lm.head.grad,
        "ref_got_gradient": any(p.grad is not None for p in lm_ref.parameters()),
        "ref_unchanged": all(torch.equal(p.detach(), q) for p, q in zip(lm_ref.parameters(), before)),
    }
