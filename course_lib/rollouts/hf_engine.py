"""`HFEngine`: batched sampling with a Hugging Face causal LM on the policy module itself.

Left padding, a KV cache, one forward per new token, finished rows dropped from the batch. It
shares the policy's parameters, so it is always in sync and `load_weights` has nothing to copy.
The CPU default; see `interface` for the contract it keeps.
"""

from __future__ import annotations

import torch

from .interface import Rollout, SamplingParams, cut_at_stop


class HFEngine:
    """Batched sampling with a Hugging Face causal LM, sharing the policy module (CPU default).

    Prompts are left-padded so that every row's next token sits in the last column; positions
    come from the attention mask, so padding changes nothing for a row. Sampling draws from
    softmax(logits / T) (after an optional top-p cut); T = 0 is greedy. With `params.seed`
    the call uses its own generator; without, torch's global RNG (which checkpoints save).
    """

    def __init__(self, model: torch.nn.Module, tokenizer, batch_size: int = 64):
        if tokenizer.pad_token_id is None:
            raise ValueError("the tokenizer has no pad_token_id; set one before generating")
        self.model = model
        self.tokenizer = tokenizer
        self.batch_size = batch_size

    def load_weights(self, model: torch.nn.Module) -> None:
        if model is self.model:
            return  # the same module: always in sync
        self.model.load_state_dict(model.state_dict())

    @torch.no_grad()
    def generate(self, prompts: list[str], params: SamplingParams) -> list[Rollout]:
        expanded = [p for p in prompts for _ in range(params.n)]
        gen = None
        if params.seed is not None:
            gen = torch.Generator(device=self._device()).manual_seed(params.seed)  # where the draws happen
        was_training = self.model.training
        self.model.eval()
        try:
            out: list[Rollout] = []
            for start in range(0, len(expanded), self.batch_size):
                out += self._generate_batch(expanded[start : start + self.batch_size], params, gen)
        finally:
            self.model.train(was_training)
        return out

    def _device(self) -> torch.device:
        return next(self.model.parameters()).device

    def _generate_batch(self, prompts: list[str], params: SamplingParams, gen) -> list[Rollout]:
        tok = self.tokenizer
        device = self._device()
        ids = tok(list(prompts), add_special_tokens=False)["input_ids"]
        width = max(len(x) for x in ids)
        batch = len(ids)
        input_ids = torch.full((batch, width), tok.pad_token_id, dtype=torch.long)
        attn = torch.zeros((batch, width), dtype=torch.long)
        for i, x in enumerate(ids):
            input_ids[i, width - len(x) :] = torch.tensor(x, dtype=torch.long)
            attn[i, width - len(x) :] = 1
        input_ids, attn = input_ids.to(device), attn.to(device)
        positions = (attn.cumsum(-1) - 1).clamp(min=0)
        eos = tok.eos_token_id
        max_stop = max((len(s) for s in params.stop), default=0)

        generated: list[list[int]] = [[] for _ in range(batch)]
        finish = [None] * batch
        rows = list(range(batch))  # original row of each row of the tensors below
        out = self.model(input_ids=input_ids, attention_mask=attn, position_ids=positions, use_cache=True)
        past = out.past_key_values
        logits = out.logits[:, -1, :].float()
        next_pos = positions[:, -1] + 1
        for t in range(params.max_tokens):
            if eos is not None and t < params.min_tokens:
                logits[:, eos] = float("-inf")
            nxt = self._pick(logits, params, gen)
            for j, i in enumerate(rows):
                if finish[i] is not None:
                    continue
                token = int(nxt[j])
                if eos is not None and token == eos:
                    finish[i] = "stop"
                    continue
                generated[i].append(token)
                if params.stop and t + 1 > params.min_tokens:
                    # only the tail can newly complete a stop string
                    tail = tok.decode(generated[i][-(max_stop + 2) :], skip_special_tokens=False)
                    if any(s in tail for s in params.stop):
                        finish[i] = "stop"
            live = [j for j, i in enumerate(rows) if finish[i] is None]
            if not live or t + 1 == params.max_tokens:
                break
            if len(live) <= 0.75 * len(rows) and hasattr(past, "batch_select_indices"):
                # drop finished rows from the batch (and the KV cache): they cost as much as live ones
                keep = torch.tensor(live, device=device)
                past.batch_select_indices(keep)
                attn, next_pos, nxt = attn[keep], next_pos[keep], nxt[keep]
                rows = [rows[j] for j in live]
            done = torch.tensor([finish[i] is not None for i in rows], device=device)
            nxt = torch.where(done, torch.full_like(nxt, tok.pad_token_id), nxt)
            attn = torch.cat([attn, (~done).long()[:, None]], dim=1)
            out = self.model(
                input_ids=nxt[:, None], attention_mask=attn, position_ids=next_pos[:, None],
                past_key_values=past, use_cache=True,
            )
            past = out.past_key_values
            logits = out.logits[:, -1, :].float()
            next_pos = next_pos + 1

        rollouts = []
        for i in range(batch):
            text = tok.decode(generated[i], skip_special_tokens=False)
            token_ids = generated[i]
            reason = finish[i] or "length"
            cut, stopped = cut_at_stop(text, params.stop)
            if stopped:  # the last id completed the stop string; drop any text after it
                reason = "stop"
                text = cut
            rollouts.append(Rollout(prompt=prompts[i], text=text, token_ids=list(token_ids), finish_reason=reason))
        return rollouts

    @staticmethod
    def _pick(logits: torch.Tensor, params: SamplingParams, gen) -> torch.Tensor:
        if params.temperature == 0:
            return logits.argmax(dim=-1)
        scaled = logits / params.temperature
        if params.top_p < 1.0:
            sorted_logits, order = scaled.sort(dim=-1, descending=True)
            probs = sorted_logits.softmax(dim=-1)
            drop = probs.cumsum(-1) - probs > params.top_p  # keep the smallest set reaching top_p
            sorted_logits = sorted_logits.masked_fill(drop, float("-inf"))
            scaled = torch.full_like(scaled, float("-inf")).scatter(-1, order, sorted_logits)
        probs = scaled.softmax(dim=-1)
        # exponential-race sampling: argmax p / E with E ~ Exp(1) draws index v with probability
        # p_v (as vLLM samples); cheaper than torch.multinomial on CPU
        race = torch.empty_like(probs).exponential_(generator=gen)
        return (probs / race).argmax(dim=-1)
