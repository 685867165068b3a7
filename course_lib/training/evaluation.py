"""Evaluation: format and answer accuracy with `r1_zero_reward_fn`, and a report of generations.

`evaluate` samples one response per problem (greedy by default) with any rollout engine and
averages the three rewards; the sampling, the grading and the three categories (format wrong,
answer wrong, correct) are the graded `course_lib.evaluate` of notebook 05, which this module
wraps for records, models and long lists. `log_generations` writes what a person needs to read a
model's behaviour: prompt, response, gold answer, rewards, the mean entropy of the response
tokens and the lengths, one jsonl line each, with a summary split by correct and wrong
responses (a model that is wrong with long, high-entropy answers is guessing; short confident
wrong answers are a systematic mistake). `exact_kl_to_reference` measures how far a policy has
moved from its reference: the exact KL over the whole vocabulary on the policy's own samples.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Callable

import torch

from ..gsm8k import as_r1_zero
from ..kl import exact_kl
from ..logprobs import get_response_log_probs
from ..rewards import CATEGORIES
from ..rewards import evaluate as graded_evaluate
from ..rollouts import FastEngine, HFEngine, RolloutEngine, SamplingParams, UnsupportedModelError
from ..rollouts.fast_engine import check_supported
from ..tokenization import tokenize_prompt_and_output
from .models import TemperatureScaled


def _engine(engine_or_model, tokenizer, batch_size: int) -> RolloutEngine:
    """An engine as given, or a model wrapped in `FastEngine` (Qwen2/Llama) or else `HFEngine`."""
    if isinstance(engine_or_model, torch.nn.Module):
        try:
            check_supported(engine_or_model)
        except UnsupportedModelError:
            return HFEngine(engine_or_model, tokenizer, batch_size=batch_size)
        return FastEngine(engine_or_model, tokenizer, batch_size=batch_size)
    return engine_or_model


def evaluate(engine_or_model, tokenizer, examples: list[dict], max_tokens: int = 128, temperature: float = 0.0,
             batch_size: int = 256, seed: int = 0, progress: bool = False, return_rollouts: bool = False,
             evaluate_fn: Callable | None = None) -> dict:
    """Format and answer accuracy of one response per example: `course_lib.evaluate` on records.

    The generation, the grading and the three categories are the graded `course_lib.evaluate`
    (notebook 05), or `evaluate_fn` when given (a notebook passes its own); this wrapper turns
    records into prompts and ground truths, a model into an engine, and the settings into
    `SamplingParams` (stop at "</answer>"), runs it `batch_size` examples at a time (a progress
    bar per chunk when `progress`), and adds the response lengths.

    Args:
        engine_or_model: a `RolloutEngine`, or a model (wrapped in the default engine, `FastEngine`
            for Qwen2/Llama models and `HFEngine` for others).
        examples: GSM8K-style or r1_zero records.
        temperature: 0 (default) is greedy, the usual way to report accuracy.
    Returns:
        {"format_reward", "answer_reward", "reward", "n", "counts", "mean_response_tokens",
         "truncated_fraction"} (and "rollouts", "scores" and "categories" when `return_rollouts`).
    """
    examples = as_r1_zero(examples)
    if not examples:  # nothing to grade: zeros, as a mean over no example is reported here
        return {"format_reward": 0.0, "answer_reward": 0.0, "reward": 0.0, "n": 0, "counts": dict.fromkeys(CATEGORIES, 0),
                "mean_response_tokens": 0.0, "truncated_fraction": 0.0,
                **({"rollouts": [], "scores": [], "categories": []} if return_rollouts else {})}
    engine = _engine(engine_or_model, tokenizer, batch_size)
    params = SamplingParams(temperature=temperature, max_tokens=max_tokens, stop=("</answer>",), n=1, seed=seed)
    grade = evaluate_fn or graded_evaluate
    chunk = max(batch_size, 1)
    rollouts, scores, categories = [], [], []
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(examples), desc="eval", leave=False)
    for start in range(0, len(examples), chunk):
        part = examples[start : start + chunk]
        res = grade(engine, [ex["prompt"] for ex in part], [ex["ground_truth"] for ex in part], params)
        rollouts += res["rollouts"]
        scores += res["rewards"]
        categories += res["categories"]
        if bar is not None:
            bar.update(len(part))
    if bar is not None:
        bar.close()
    n = len(scores)
    out = {
        "format_reward": sum(s["format_reward"] for s in scores) / n,
        "answer_reward": sum(s["answer_reward"] for s in scores) / n,
        "reward": sum(s["reward"] for s in scores) / n,
        "n": n,
        "counts": {c: categories.count(c) for c in CATEGORIES},
        "mean_response_tokens": sum(len(r.token_ids) for r in rollouts) / n,
        "truncated_fraction": sum(r.finish_reason == "length" for r in rollouts) / n,
    }
    if return_rollouts:
        out["rollouts"] = rollouts
        out["scores"] = scores
        out["categories"] = categories
    return out


# the most logits one forward of `response_entropies` makes: (rows, T, V) of 2^28 elements, 512 MiB in bfloat16
LOGIT_ELEMENTS = 1 << 28


@torch.no_grad()
def response_entropies(model, tokenizer, prompts: list[str], responses: list[str], batch_size: int = 64,
                       temperature: float = 1.0, max_logit_elements: int = LOGIT_ELEMENTS) -> list[float]:
    """Mean token entropy of each response under `model` (NaN for an empty response).

    `batch_size` rows are tokenized together, and a forward takes as many of them as keep its (rows, T, V) logits
    within `max_logit_elements` (at least one): 64 rows of 1,200 tokens over Qwen2.5's 151,936-token vocabulary
    would be 23 GB of bfloat16 logits, beside a vLLM engine that holds most of the GPU."""
    scored = TemperatureScaled(model, temperature)  # temperature 0 (greedy): no scaling, the rule's one place
    device = next(model.parameters()).device
    vocab = model.get_output_embeddings().weight.shape[0]
    was_training = model.training
    model.eval()
    out: list[float] = []
    try:
        for start in range(0, len(prompts), batch_size):
            batch = tokenize_prompt_and_output(prompts[start : start + batch_size],
                                               responses[start : start + batch_size], tokenizer)
            rows = max(1, max_logit_elements // (batch["input_ids"].shape[1] * vocab))
            for first in range(0, batch["input_ids"].shape[0], rows):
                part = {k: v[first : first + rows].to(device) for k, v in batch.items()}
                res = get_response_log_probs(scored, part["input_ids"], part["labels"], return_token_entropy=True)
                mask = part["response_mask"]
                # the masked mean written out (masked_mean is graded in notebook 07, after the
                # notebooks that log generations): an empty response gives 0/0 = NaN
                kept = torch.where(mask, res["token_entropy"], 0.0)
                out += (kept.sum(dim=-1) / mask.sum(dim=-1)).tolist()
    finally:
        model.train(was_training)
    return out


def log_generations(model, tokenizer, examples: list[dict], path: str | os.PathLike | None = None,
                    engine: RolloutEngine | None = None, max_tokens: int = 128, temperature: float = 0.0,
                    batch_size: int = 256, seed: int = 0, step: int | None = None,
                    evaluate_fn: Callable | None = None, return_records: bool = False) -> dict:
    """Generate for `examples`, grade them, and summarise what a person needs to read the model.

    Per example: prompt, response, gold, format_reward, answer_reward, reward, category,
    mean_token_entropy (of the response tokens, under `model`), response_tokens, response_chars,
    finish_reason (and step when given); one jsonl line each in `path` when given. The summary
    (also written next to the file as `<name>.summary.json`) gives the rewards, the counts of
    the three categories, and the mean response length and entropy over all, correct and wrong
    (format or answer) responses: a model that is wrong with long, high-entropy answers is
    guessing; short confident wrong answers are a systematic mistake. The generation and the
    grading are `evaluate` above (so `evaluate_fn` too); `return_records` adds the records.
    """
    res = evaluate(engine or model, tokenizer, examples, max_tokens, temperature, batch_size, seed,
                   return_rollouts=True, evaluate_fn=evaluate_fn)
    examples = as_r1_zero(examples)
    texts = [r.text for r in res["rollouts"]]
    entropies = response_entropies(model, tokenizer, [ex["prompt"] for ex in examples], texts,
                                   temperature=temperature)
    records = []
    for ex, r, s, cat, h in zip(examples, res["rollouts"], res["scores"], res["categories"], entropies):
        rec = {"prompt": ex["prompt"], "response": r.text, "gold": ex["ground_truth"], **s, "category": cat,
               "mean_token_entropy": h, "response_tokens": len(r.token_ids), "response_chars": len(r.text),
               "finish_reason": r.finish_reason}
        if step is not None:
            rec["step"] = step
        records.append(rec)
    summary = _generations_summary(records, res, step)
    if path is not None:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            for rec in records:
                f.write(json.dumps(rec, ensure_ascii=False) + "\n")
        path.with_name(path.stem + ".summary.json").write_text(json.dumps(summary, indent=2))
    if return_records:
        summary["records"] = records
    return summary


def _generations_summary(records: list[dict], res: dict, step: int | None) -> dict:
    def stats(rs: list[dict]) -> dict:
        n = len(rs)
        if n == 0:
            return {"n": 0}
        ent = [r["mean_token_entropy"] for r in rs if r["mean_token_entropy"] == r["mean_token_entropy"]]
        return {"n": n, "mean_response_tokens": sum(r["response_tokens"] for r in rs) / n,
                "mean_token_entropy": sum(ent) / len(ent) if ent else float("nan")}

    summary = {
        "n": res["n"], "format_reward": res["format_reward"], "answer_reward": res["answer_reward"],
        "counts": res["counts"], "all": stats(records),
        "correct": stats([r for r in records if r["category"] == "correct"]),
        "wrong": stats([r for r in records if r["category"] != "correct"]),
    }
    if step is not None:
        summary["step"] = step
    return summary


@torch.no_grad()
def exact_kl_to_reference(model, reference, tokenizer, prompts: list[str], max_tokens: int, seed: int = 0,
                          batch_size: int = 64) -> float:
    """KL(pi || pi_ref) per response token, exactly over the vocabulary, on responses `model` samples.

        sample y_i ~ pi(. | x_i) at temperature 1 (seeded), one per prompt, up to `max_tokens`
        KL = sum_i sum_t exact_kl(pi(. | x_i, y_i,<t), pi_ref(. | x_i, y_i,<t)) / (number of response tokens)

    Each position's KL is `course_lib.exact_kl` of the two models' (B, T, V) logits over the
    whole vocabulary (no estimator: the tiny world's vocabulary is small), so the only noise is
    which responses were sampled. Both models run in eval mode and get their modes back.
    Returns 0.0 when no prompt is given or no response has a token.
    """
    if not prompts:
        return 0.0
    modes = (model.training, reference.training)
    model.eval()
    reference.eval()
    try:
        params = SamplingParams(temperature=1.0, max_tokens=max_tokens, stop=("</answer>",), n=1, seed=seed)
        texts = [r.text for r in _engine(model, tokenizer, batch_size).generate(list(prompts), params)]
        device = next(model.parameters()).device
        ref_device = next(reference.parameters()).device
        total, tokens = 0.0, 0
        for start in range(0, len(texts), batch_size):
            batch = tokenize_prompt_and_output(list(prompts[start : start + batch_size]),
                                               texts[start : start + batch_size], tokenizer)
            ids, mask = batch["input_ids"], batch["response_mask"].bool().to(device)
            policy_logits = model(ids.to(device)).logits.float()  # (B, T, V)
            ref_logits = reference(ids.to(ref_device)).logits.float().to(device)
            kl = exact_kl(policy_logits, ref_logits)  # (B, T)
            total += float(torch.where(mask, kl, torch.zeros_like(kl)).sum())
            tokens += int(mask.sum())
    finally:
        model.train(modes[0])
        reference.train(modes[1])
    return total / tokens if tokens else 0.0
