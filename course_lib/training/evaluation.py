"""Evaluation: format and answer accuracy with `r1_zero_reward_fn`, and a report of generations.

`evaluate` samples one response per problem (greedy by default) with any rollout engine and
averages the three rewards. `log_generations` writes what a person needs to read a model's
behaviour: prompt, response, gold answer, rewards, the mean entropy of the response tokens and
the lengths, one jsonl line each, with a summary split by correct and wrong responses (a model
that is wrong with long, high-entropy answers is guessing; short confident wrong answers are
a systematic mistake).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch

from ..gsm8k import as_r1_zero
from ..logprobs import get_response_log_probs
from ..masking import masked_mean
from ..rewards import r1_zero_reward_fn
from ..rollouts import FastEngine, HFEngine, Rollout, RolloutEngine, SamplingParams, UnsupportedModelError
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


def generate_responses(engine_or_model, tokenizer, examples, max_tokens=128, temperature=0.0,
                       batch_size=256, seed=0, progress=False) -> tuple[list[dict], list[Rollout]]:
    examples = as_r1_zero(examples)
    engine = _engine(engine_or_model, tokenizer, batch_size)
    params = SamplingParams(temperature=temperature, max_tokens=max_tokens, stop=("</answer>",), n=1, seed=seed)
    prompts = [ex["prompt"] for ex in examples]
    rollouts: list[Rollout] = []
    chunk = max(batch_size, 1)
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(prompts), desc="eval", leave=False)
    for start in range(0, len(prompts), chunk):
        rollouts += engine.generate(prompts[start : start + chunk], params)
        if bar is not None:
            bar.update(min(chunk, len(prompts) - start))
    if bar is not None:
        bar.close()
    return examples, rollouts


def evaluate(engine_or_model, tokenizer, examples: list[dict], max_tokens: int = 128, temperature: float = 0.0,
             batch_size: int = 256, seed: int = 0, progress: bool = False, return_rollouts: bool = False) -> dict:
    """Format and answer accuracy of one response per example, graded by `r1_zero_reward_fn`.

    Args:
        engine_or_model: a `RolloutEngine`, or a model (wrapped in the default engine, `FastEngine`
            for Qwen2/Llama models and `HFEngine` for others).
        examples: GSM8K-style or r1_zero records.
        temperature: 0 (default) is greedy, the usual way to report accuracy.
    Returns:
        {"format_reward", "answer_reward", "reward", "n", "mean_response_tokens",
         "truncated_fraction"} (and "rollouts" and "scores" when `return_rollouts`).
    """
    examples, rollouts = generate_responses(engine_or_model, tokenizer, examples, max_tokens, temperature,
                                            batch_size, seed, progress)
    scores = [r1_zero_reward_fn(r.text, ex["ground_truth"]) for r, ex in zip(rollouts, examples)]
    n = max(len(scores), 1)
    out = {
        "format_reward": sum(s["format_reward"] for s in scores) / n,
        "answer_reward": sum(s["answer_reward"] for s in scores) / n,
        "reward": sum(s["reward"] for s in scores) / n,
        "n": len(scores),
        "mean_response_tokens": sum(len(r.token_ids) for r in rollouts) / n,
        "truncated_fraction": sum(r.finish_reason == "length" for r in rollouts) / n,
    }
    if return_rollouts:
        out["rollouts"] = rollouts
        out["scores"] = scores
    return out


@torch.no_grad()
def response_entropies(model, tokenizer, prompts: list[str], responses: list[str], batch_size: int = 64,
                       temperature: float = 1.0) -> list[float]:
    """Mean token entropy of each response under `model` (NaN for an empty response)."""
    scored = TemperatureScaled(model, temperature) if temperature not in (0, 1.0) else model
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    out: list[float] = []
    try:
        for start in range(0, len(prompts), batch_size):
            batch = tokenize_prompt_and_output(prompts[start : start + batch_size],
                                               responses[start : start + batch_size], tokenizer)
            res = get_response_log_probs(scored, batch["input_ids"].to(device), batch["labels"].to(device),
                                         return_token_entropy=True)
            mask = batch["response_mask"].to(device)
            out += masked_mean(res["token_entropy"], mask, dim=-1).tolist()
    finally:
        model.train(was_training)
    return out


def log_generations(model, tokenizer, examples: list[dict], path: str | os.PathLike, engine: RolloutEngine | None = None,
                    max_tokens: int = 128, temperature: float = 0.0, batch_size: int = 256, seed: int = 0,
                    step: int | None = None) -> dict:
    """Generate for `examples`, write one jsonl line per example to `path`, return the summary.

    Each line: prompt, response, gold, format_reward, answer_reward, reward, mean_token_entropy,
    response_tokens, response_chars, finish_reason (and step when given). The summary (also
    written next to the file as `<name>.summary.json`) gives the mean response length and
    entropy over all, correct and wrong responses, and the rewards.
    """
    examples, rollouts = generate_responses(engine or model, tokenizer, examples, max_tokens, temperature,
                                            batch_size, seed)
    prompts = [ex["prompt"] for ex in examples]
    texts = [r.text for r in rollouts]
    entropies = response_entropies(model, tokenizer, prompts, texts, temperature=temperature or 1.0)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    records = []
    for ex, r, h in zip(examples, rollouts, entropies):
        s = r1_zero_reward_fn(r.text, ex["ground_truth"])
        rec = {"prompt": ex["prompt"], "response": r.text, "gold": ex["ground_truth"], **s,
               "mean_token_entropy": h, "response_tokens": len(r.token_ids), "response_chars": len(r.text),
               "finish_reason": r.finish_reason}
        if step is not None:
            rec["step"] = step
        records.append(rec)
    with open(path, "w", encoding="utf-8") as f:
        for rec in records:
            f.write(json.dumps(rec, ensure_ascii=False) + "\n")

    def stats(rs: list[dict]) -> dict:
        n = len(rs)
        if n == 0:
            return {"n": 0}
        ent = [r["mean_token_entropy"] for r in rs if r["mean_token_entropy"] == r["mean_token_entropy"]]
        return {"n": n, "mean_response_tokens": sum(r["response_tokens"] for r in rs) / n,
                "mean_token_entropy": sum(ent) / len(ent) if ent else float("nan")}

    correct = [r for r in records if r["answer_reward"] == 1.0]
    wrong = [r for r in records if r["answer_reward"] != 1.0]
    n = max(len(records), 1)
    summary = {
        "n": len(records),
        "format_reward": sum(r["format_reward"] for r in records) / n,
        "answer_reward": sum(r["answer_reward"] for r in records) / n,
        "all": stats(records), "correct": stats(correct), "wrong": stats(wrong),
    }
    if step is not None:
        summary["step"] = step
    path.with_name(path.stem + ".summary.json").write_text(json.dumps(summary, indent=2))
    return summary
