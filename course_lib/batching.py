"""Static and continuous batching of greedy decoding (notebook 14), over a decode step.

A server decodes many requests at once in `batch_size` slots; each slot holds one request's KV
cache, at that request's own position. The batchers only decide which request is in which slot
and when; the model is behind a seam, a `DecodeStep` (`prefill` one slot, `decode` a list of
slots), so they run the same on a real model (`course_lib.rollouts.slot_decoder.SlotDecoder`)
and on `SyntheticDecodeStep`, a model-free step that checks how it is driven.

- static batching: the requests in order, `batch_size` at a time; a batch is decoded until every
  request in it has finished, and only then does the next batch start. A finished row is no
  longer fed but keeps its slot until the batch drains: that idle slot is the waste;
- continuous batching: whenever a slot is free (at the start, and right after a decode step in
  which a request finished) the next waiting request is admitted into it (prefilled), so that
  every decode step feeds every busy slot; a finished request leaves its slot at once.

A request {"prompt_ids": list[int], "max_tokens": int} generates tokens until it generates
`eos_id` (kept in its output) or has generated max_tokens tokens, whichever comes first: its
first token comes from its prefill, each further one from a decode step. Each slot has its own
cache, so both batchers give every request exactly the tokens greedy decoding of it alone gives;
they differ in how many decode steps they take. The accounting both return:

    steps         = the number of `decode` calls          prefills = the number of `prefill` calls
    slot_steps    = the sum over decode calls of the number of slots fed
    utilization   = slot_steps / (steps * batch_size)      (0.0 when no decode step ran)
    admitted_at[i] = the number of decode calls made before request i was prefilled

Both return {"outputs": list[list[int]] (each request's generated tokens, in request order),
"steps", "prefills", "slot_steps": int, "utilization": float, "admitted_at": list[int]}, and
raise ValueError for batch_size < 1, a request without prompt_ids, or max_tokens < 1.
"""

from __future__ import annotations

import copy
from typing import Protocol, runtime_checkable


@runtime_checkable
class DecodeStep(Protocol):
    """The seam the batchers drive: a model with one KV cache per slot, decoded greedily."""

    def prefill(self, slot: int, prompt_ids: list[int]) -> int:
        """Reset slot `slot`'s cache, feed it `prompt_ids` (P tokens, positions 0 .. P-1) and
        return the greedy next token (the request's first generated token)."""
        ...

    def decode(self, slots: list[int], tokens: list[int]) -> list[int]:
        """Feed tokens[j] to slots[j] (distinct slots, each at its own next position, each
        attending to its own cache only) and return each slot's greedy next token, in order."""
        ...


def _start(requests: list[dict], batch_size: int) -> tuple[list[list[int]], list[int]]:
    """Empty outputs and admission steps, once the arguments are checked."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    for i, request in enumerate(requests):
        if not request.get("prompt_ids"):
            raise ValueError(f"requests[{i}] has no prompt_ids (a request needs at least one prompt token)")
        if request.get("max_tokens", 0) < 1:
            raise ValueError(f"requests[{i}]: max_tokens must be >= 1, got {request.get('max_tokens')}")
    return [[] for _ in requests], [0] * len(requests)


def _finished(output: list[int], request: dict, eos_id: int) -> bool:
    return output[-1] == eos_id or len(output) >= request["max_tokens"]


def _report(outputs, admitted_at, steps: int, slot_steps: int, batch_size: int) -> dict:
    return {"outputs": outputs, "steps": steps, "prefills": len(outputs), "slot_steps": slot_steps,
            "utilization": slot_steps / (steps * batch_size) if steps else 0.0, "admitted_at": admitted_at}


def static_batch_generate(step: DecodeStep, requests: list[dict], batch_size: int, eos_id: int) -> dict:
    """Greedy outputs of `requests` by static batching, decoded through `step` in `batch_size` slots.

    requests: [{"prompt_ids": list[int], "max_tokens": int}, ...]. A request generates tokens until
    it generates `eos_id` (kept in its output) or has generated max_tokens tokens: its first token
    comes from its prefill (`step.prefill(slot, prompt_ids)`), each further one from a decode step
    (`step.decode(slots, tokens)`, one call feeding each listed slot its last token).

    Requests b*batch_size .. (b+1)*batch_size - 1 are batch b, request j of a batch in slot j;
    every request of a batch is prefilled at the same decode-step index, then the batch's
    unfinished requests are decoded together until none is left; a finished request is no longer
    fed (its slot stays idle until the batch is done). A request that finishes at its prefill
    (eos first, or max_tokens 1) is never decoded.

    Returns:
        {"outputs": list[list[int]] (each request's tokens, eos kept, in request order),
         "steps": the number of decode calls, "prefills": the number of prefill calls,
         "slot_steps": the number of slots fed, summed over the decode calls,
         "utilization": slot_steps / (steps * batch_size) (0.0 when no decode step ran),
         "admitted_at": list[int] (for each request, the number of decode calls before its prefill)},
        as the given `_report` builds it. The requests are left unchanged.
    Raises:
        ValueError: batch_size < 1 (the given `_start` checks the three).
        ValueError: a request without prompt_ids (none, or an empty list).
        ValueError: a request whose max_tokens is < 1 (or missing).
    """
    outputs, admitted_at = _start(requests, batch_size)
    steps = slot_steps = 0
    for start in range(0, len(requests), batch_size):
        live = []  # (slot, request index) of the batch's unfinished requests
        for slot, i in enumerate(range(start, min(start + batch_size, len(requests)))):
            admitted_at[i] = steps
            outputs[i].append(step.prefill(slot, list(requests[i]["prompt_ids"])))
            if not _finished(outputs[i], requests[i], eos_id):
                live.append((slot, i))
        while live:
            tokens = step.decode([slot for slot, _ in live], [outputs[i][-1] for _, i in live])
            steps, slot_steps = steps + 1, slot_steps + len(live)
            for (_, i), token in zip(live, tokens):
                outputs[i].append(token)
            live = [(slot, i) for slot, i in live if not _finished(outputs[i], requests[i], eos_id)]
    return _report(outputs, admitted_at, steps, slot_steps, batch_size)


def continuous_batch_generate(step: DecodeStep, requests: list[dict], batch_size: int, eos_id: int) -> dict:
    """Greedy outputs of `requests` by continuous batching, decoded through `step` in `batch_size` slots.

    The requests, their tokens (eos kept) and the decode step are `static_batch_generate`'s.
    Slots 0 .. batch_size-1. Before the first decode step and after each one, every free slot
    takes the next waiting request, in request order (prefilled at that decode-step index; one
    that finishes at its prefill, with eos first or max_tokens = 1, frees its slot for the next
    at once); each decode step feeds every busy slot; a request leaves its slot in the step in
    which it finishes, and a new request enters a slot by `prefill`, never by `decode`.

    Returns:
        the dict `static_batch_generate` returns ("outputs", "steps", "prefills", "slot_steps",
        "utilization", "admitted_at", each as its docstring defines it); the requests are left unchanged.
    Raises:
        ValueError: batch_size < 1.
        ValueError: a request without prompt_ids (none, or an empty list).
        ValueError: a request whose max_tokens is < 1 (or missing); `_start` checks all three.
    """
    outputs, admitted_at = _start(requests, batch_size)
    running: dict[int, int] = {}  # slot -> the request it holds
    waiting = 0  # the next request to admit
    steps = slot_steps = 0
    while True:
        for slot in range(batch_size):
            while slot not in running and waiting < len(requests):
                i, waiting = waiting, waiting + 1
                admitted_at[i] = steps
                outputs[i].append(step.prefill(slot, list(requests[i]["prompt_ids"])))
                if not _finished(outputs[i], requests[i], eos_id):
                    running[slot] = i
        if not running:
            return _report(outputs, admitted_at, steps, slot_steps, batch_size)
        slots = sorted(running)
        tokens = step.decode(slots, [outputs[running[slot]][-1] for slot in slots])
        steps, slot_steps = steps + 1, slot_steps + len(slots)
        for slot, token in zip(slots, tokens):
            i = running[slot]
            outputs[i].append(token)
            if _finished(outputs[i], requests[i], eos_id):
                del running[slot]


# ---------------------------------------------------------------- a decode step without a model
_MASK64 = (1 << 64) - 1


def _mix(x: int) -> int:
    """splitmix64's finaliser: a 64-bit integer hash."""
    x = (x + 0x9E3779B97F4A7C15) & _MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK64
    return x ^ (x >> 31)


class DecodeStepMisuse(RuntimeError):
    """A batcher drove a `SyntheticDecodeStep` against the `DecodeStep` contract."""


class SyntheticDecodeStep:
    """A deterministic `DecodeStep` without a model, for `requests`, that checks how it is driven.

    A slot's next token is a function of a hash of its whole history (the prompt and every token
    fed since its prefill) and of `salt`: `eos_id` with probability eos_rates[i] for request i
    (found by its prompt; equal prompts must have equal max_tokens and rates), otherwise one of
    0 .. vocab-1 other than eos_id. `prefill` resets the slot. Raises DecodeStepMisuse for a slot
    outside 0 .. slots-1, an empty prompt or one not among the requests, a prefill into a slot
    whose request has not finished, a decode of no slot, of a slot twice, of a slot never
    prefilled or whose request has finished (it returned eos_id, or max_tokens tokens), or of
    a token that is not the slot's last one. Counts `prefills`, `decodes` (calls) and `fed`.
    """

    def __init__(self, requests: list[dict], slots: int, eos_id: int, eos_rates: list[float], vocab: int = 64,
                 salt: int = 0):
        self.slots, self.eos_id, self.vocab, self.salt = slots, eos_id, vocab, salt
        self.known: dict[tuple[int, ...], tuple[int, float]] = {}
        for request, rate in zip(requests, eos_rates):
            key, value = tuple(request["prompt_ids"]), (request["max_tokens"], float(rate))
            if self.known.setdefault(key, value) != value:
                raise ValueError("two requests of one prompt differ in max_tokens or eos rate")
        self.state: dict[int, dict] = {}  # slot -> {"hash", "last", "made", "max_tokens", "rate"}
        self.prefills = self.decodes = self.fed = 0

    def _next(self, state: dict) -> int:
        z = _mix(state["hash"] ^ self.salt)
        if (z >> 11) / 2.0**53 < state["rate"]:
            token = self.eos_id
        else:
            token = (z % (self.vocab - 1)) if 0 <= self.eos_id < self.vocab else z % self.vocab
            token += int(0 <= self.eos_id <= token)
        state["last"], state["made"] = token, state["made"] + 1
        return token

    def _finished(self, state: dict) -> bool:
        return state["last"] == self.eos_id or state["made"] >= state["max_tokens"]

    def _slot(self, slot) -> int:
        if not isinstance(slot, int) or not 0 <= slot < self.slots:
            raise DecodeStepMisuse(f"slot {slot!r} is not one of 0 .. {self.slots - 1}")
        return slot

    def prefill(self, slot: int, prompt_ids: list[int]) -> int:
        slot, key = self._slot(slot), tuple(prompt_ids)
        if not key or key not in self.known:
            raise DecodeStepMisuse(f"prefill of slot {slot} with an empty prompt or one that is no request's")
        if slot in self.state and not self._finished(self.state[slot]):
            raise DecodeStepMisuse(f"prefill of slot {slot}, whose request has not finished")
        h = _mix(len(key))
        for token in key:
            h = _mix(h ^ (token + 1))
        max_tokens, rate = self.known[key]
        self.state[slot] = {"hash": h, "last": None, "made": 0, "max_tokens": max_tokens, "rate": rate}
        self.prefills += 1
        return self._next(self.state[slot])

    def decode(self, slots: list[int], tokens: list[int]) -> list[int]:
        slots, tokens = list(slots), list(tokens)
        if not slots or len(slots) != len(tokens) or len(set(slots)) != len(slots):
            raise DecodeStepMisuse(f"decode of slots {slots} with tokens {tokens}: one token for each of "
                                   f"one or more distinct slots")
        for slot, token in zip(slots, tokens):
            state = self.state.get(self._slot(slot))
            if state is None:
                raise DecodeStepMisuse(f"decode of slot {slot}, which was never prefilled")
            if self._finished(state):
                raise DecodeStepMisuse(f"decode of slot {slot}, whose request has finished")
            if token != state["last"]:
                raise DecodeStepMisuse(f"slot {slot} fed token {token}, but its last token is {state['last']}")
        self.decodes, self.fed = self.decodes + 1, self.fed + len(slots)
        out = []
        for slot, token in zip(slots, tokens):
            state = self.state[slot]
            state["hash"] = _mix(state["hash"] ^ (token + 1))
            out.append(self._next(state))
        return out


def run_checked(batcher, requests: list[dict], batch_size: int, eos_id: int, eos_rates: list[float],
                vocab: int = 64, salt: int = 0, expect_error: bool = False) -> dict:
    """`batcher(step, requests, batch_size, eos_id)` on a fresh `SyntheticDecodeStep`: its report, what
    the step saw and whether `requests` was left unchanged; {"misuse": the step's message} when
    the batcher drove the step against its contract. With `expect_error`, only which exception it
    raised: {"raises": "ValueError"} (or a subclass), "other", or None when it raised none.

    Returns:
        {"outputs", "steps", "prefills", "slot_steps", "utilization", "admitted_at" (the report's),
         "step_calls": {"prefill", "decode", "fed"} (counted by the step), "requests_unchanged",
         "misuse": None}.
    """
    before = copy.deepcopy(requests)
    step = SyntheticDecodeStep(before, slots=max(1, batch_size), eos_id=eos_id, eos_rates=eos_rates, vocab=vocab,
                               salt=salt)
    try:
        report = batcher(step, requests, batch_size, eos_id)
    except DecodeStepMisuse as e:
        return {"raises": "other"} if expect_error else {"misuse": str(e)}
    except Exception as e:  # noqa: BLE001 - which exception is the output
        if not expect_error:
            raise
        return {"raises": "ValueError" if isinstance(e, ValueError) else "other"}
    if expect_error:
        return {"raises": None}
    keys = ("outputs", "steps", "prefills", "slot_steps", "utilization", "admitted_at")
    return {**{k: report[k] for k in keys}, "step_calls": {"prefill": step.prefills, "decode": step.decodes,
                                                          "fed": step.fed},
            "requests_unchanged": requests == before, "misuse": None}
