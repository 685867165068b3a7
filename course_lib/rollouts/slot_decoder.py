"""`SlotDecoder`: the course's decode step with one KV cache per slot, for the batchers of
notebook 14 (`course_lib.batching`: static and continuous batching).

It is `course_lib.batching.DecodeStep` on the fast engine's network (`fast_engine._Network`):
one preallocated cache of (batch_size, kv_heads, max_len, head_dim) per layer, in which slot s
is row s, with its own position (the number of tokens in its cache) and its own key mask (the
columns it has written since its prefill). `prefill(slot, prompt_ids)` resets the slot and
feeds the prompt into its row alone (positions 0 .. P-1, causal: what the fast engine does for
one prompt); `decode(slots, tokens)` feeds one token to each listed slot in one batched forward,
each at its own column and position, each attending to its own columns only. Greedy: the next
token is the argmax of the logits, as `FastEngine` at temperature 0.

So a request decoded in any slot, beside any others, sees the same keys at the same positions
as decoded alone. The batched matrix products and the attention over a longer, masked key
range can round differently from a batch of one (tests/test_slot_decoder.py measures it on the
tiny model: no token differs).
"""

from __future__ import annotations

import torch

from .fast_engine import _Network, check_supported


class SlotDecoder:
    """A `DecodeStep` over `model` (Qwen2/Llama) with `batch_size` slots of `max_len` tokens each."""

    def __init__(self, model: torch.nn.Module, batch_size: int, max_len: int):
        check_supported(model)
        if batch_size < 1 or max_len < 2:
            raise ValueError(f"need batch_size >= 1 and max_len >= 2, got {batch_size} and {max_len}")
        self.net = _Network(model)
        self.batch_size, self.max_len = batch_size, max_len
        param = next(model.parameters())
        self.device, dtype = param.device, param.dtype
        self.cache = self.net.new_cache(batch_size, max_len, self.device, dtype)
        self.cos, self.sin = self.net.rope_table(max_len, self.device, dtype)
        self.valid = torch.zeros(batch_size, max_len, dtype=torch.bool, device=self.device)  # keys a slot may see
        self.length = [0] * batch_size  # tokens in each slot's cache; 0: never prefilled

    def _slot(self, slot: int) -> int:
        if not 0 <= slot < self.batch_size:
            raise ValueError(f"slot {slot} is not one of 0 .. {self.batch_size - 1}")
        return slot

    @torch.no_grad()
    def prefill(self, slot: int, prompt_ids: list[int]) -> int:
        slot, width = self._slot(slot), len(prompt_ids)
        if not 1 <= width < self.max_len:
            raise ValueError(f"prompt_ids: {width} tokens; a slot's prompt holds 1 .. {self.max_len - 1} "
                             f"(max_len {self.max_len})")
        ids = torch.tensor([prompt_ids], dtype=torch.long, device=self.device)
        row = [(k[slot : slot + 1], v[slot : slot + 1]) for k, v in self.cache]  # views: written in place
        causal = torch.ones(width, width, dtype=torch.bool, device=self.device).tril()
        logits = self.net.forward(ids, self.cos[None, :width], self.sin[None, :width], row, 0, causal[None, None])
        self.valid[slot] = False
        self.valid[slot, :width] = True
        self.length[slot] = width
        return int(logits[0].argmax())

    @torch.no_grad()
    def decode(self, slots: list[int], tokens: list[int]) -> list[int]:
        if not slots or len(slots) != len(tokens) or len(set(slots)) != len(slots):
            raise ValueError(f"slots {slots} and tokens {tokens}: one token for each of one or more distinct slots")
        for slot in slots:
            if self.length[self._slot(slot)] == 0:
                raise ValueError(f"slot {slot} was never prefilled")
            if self.length[slot] >= self.max_len:
                raise ValueError(f"slot {slot} is full (max_len {self.max_len})")
        rows = torch.tensor(slots, dtype=torch.long, device=self.device)
        columns = torch.tensor([self.length[s] for s in slots], dtype=torch.long, device=self.device)
        self.valid[rows, columns] = True
        end = int(columns.max()) + 1
        ids = torch.tensor(tokens, dtype=torch.long, device=self.device)[:, None]
        logits = self.net.forward(ids, self.cos[columns][:, None], self.sin[columns][:, None], self.cache, columns,
                                  self.valid[rows, None, None, :end], rows=rows)
        for s in slots:
            self.length[s] += 1
        return logits.argmax(dim=-1).tolist()


__all__ = ["SlotDecoder"]
