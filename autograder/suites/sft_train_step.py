"""Hidden cases of `sft_train_step(model, tokenizer, optimizer, batch_examples,
gradient_accumulation_steps, max_grad_norm=1.0, scheduler=None, tokenize_fn=...,
log_probs_fn=..., train_step_fn=...)` (notebook 05).

Each case trains a small causal LM (embedding -> causal running mean -> tanh -> output head,
built here from the case's float64 weights: float64 end to end, so the expected parameters are
exact to about 1e-15 and any batching of a correct step lands within the measured tolerance)
with AdamW for a few optimizer steps of the student's `sft_train_step`, on r1_zero examples tokenized by the course tokenizer, with the released
references of notebooks 01, 03 and 04 passed in as `tokenize_fn`, `log_probs_fn` and
`train_step_fn` (wrapped to count their calls). Outputs, after every step: the parameters
(compared with those of the reference step, to float rounding), the learning rate (the
schedule steps once per optimizer step), whether gradients are left over, the returned
`loss`, `grad_norm` (before clipping), `response_tokens` and `nll_sum`, and the number of
calls of each passed function (once per micro-batch). Cases: k = 1..4, clipping active and
inactive, with and without a schedule, weight decay, examples of very different lengths, and
a batch that does not split into k micro-batches (ValueError).
"""

from __future__ import annotations

from types import SimpleNamespace

import torch

from autograder.suite_api import course_tokenizer

GRADED = "sft_train_step"
# each error case and the phrase of the reference's `Raises:` section that states it (tests/test_contracts.py)
RAISES = {"batch_does_not_split_into_k": "a batch whose size gradient_accumulation_steps does not divide"}
PERTURB = True  # the inputs' rounding carried through the update (autograder.cases.perturb)
WARM = ('transformers', 'tokenizers')  # imported by a judge runner started ahead (autograder.judge)
TIMEOUT = 240


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




def make_inputs(gen: torch.Generator) -> list[tuple[str, dict]]:
    from course_lib import gsm8k_to_r1_zero, load_problems

    problems = load_problems("arith", "train")
    vocab = len(course_tokenizer())

    def examples(n):
        idx = torch.randperm(len(problems), generator=gen)[:n].tolist()
        return [{k: v for k, v in gsm8k_to_r1_zero(problems[i]).items() if k in ("prompt", "output")} for i in idx]

    def case(steps, batch, k, clip=0.05, lr=1e-2, weight_decay=0.0, schedule=True, data=None, H=8):
        return {
            "embedding": torch.randn(vocab, H, generator=gen, dtype=torch.float64) * 0.5,
            "head": torch.randn(vocab, H, generator=gen, dtype=torch.float64) * 0.5,
            "examples": data or examples(steps * batch),
            "steps": steps, "batch": batch, "k": k, "max_grad_norm": clip, "lr": lr,
            "weight_decay": weight_decay, "schedule": schedule,
        }

    short_long = examples(6)
    short_long[0] = {"prompt": "Q: 2 + 3?", "output": " 5 </think> <answer> 5 </answer>"}
    short_long[3] = {"prompt": "Q: 7 * 6?", "output": " 42 </think> <answer> 42 </answer>"}
    return [
        ("k2_B4_clipped_with_schedule", case(3, 4, 2)),
        ("k1_B3", case(2, 3, 1)),
        ("k4_B4_not_clipped", case(2, 4, 4, clip=1e4)),
        ("k2_B4_no_schedule", case(2, 4, 2, schedule=False)),
        ("k3_B6_weight_decay", case(2, 6, 3, weight_decay=0.1)),
        ("k2_B6_lengths_far_apart", case(1, 6, 2, data=short_long)),
        ("batch_does_not_split_into_k", case(1, 5, 2)),
    ]


def call(fn, inputs: dict) -> dict:
    from course_lib import get_response_log_probs, sft_microbatch_train_step, tokenize_prompt_and_output

    torch.manual_seed(0)
    tokenizer = course_tokenizer()
    model = TinyCausalLM(inputs["embedding"], inputs["head"])
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=inputs["lr"], betas=(0.9, 0.95),
                                  weight_decay=inputs["weight_decay"])
    # a schedule that changes the learning rate at every step: stepping it per micro-batch shows
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: 0.5 ** s) if inputs["schedule"] else None
    calls = {"tokenize_fn": 0, "log_probs_fn": 0, "train_step_fn": 0}

    def counting(name, f):
        def wrapped(*args, **kwargs):
            calls[name] += 1
            return f(*args, **kwargs)
        return wrapped

    per_step = []
    batch = inputs["batch"]
    for step in range(inputs["steps"]):
        examples = [dict(e) for e in inputs["examples"][step * batch:(step + 1) * batch]]
        try:
            out = fn(model, tokenizer, optimizer, examples, inputs["k"], inputs["max_grad_norm"], scheduler,
                     tokenize_fn=counting("tokenize_fn", tokenize_prompt_and_output),
                     log_probs_fn=counting("log_probs_fn", get_response_log_probs),
                     train_step_fn=counting("train_step_fn", sft_microbatch_train_step))
        except ValueError:
            return {"raises_value_error": True}
        per_step.append({
            "loss": float(out["loss"]),
            "grad_norm": float(out["grad_norm"]),
            "response_tokens": int(out["response_tokens"]),
            "nll_sum": float(out["nll_sum"]),
            "lr_after": float(optimizer.param_groups[0]["lr"]),
            "no_gradient_left": all(p.grad is None or not bool(p.grad.any()) for p in model.parameters()),
            "embedding": model.embedding.detach().clone(),
            "head": model.head.detach().clone(),
        })
    return {"steps": per_step, "calls": dict(calls), "raises_value_error": False}
