"""The grader's side of `static_batch_generate` (notebook 14): how its hidden cases are drawn, the
correct versions that must earn full marks and the known mistakes that must lose them, each with the
sentence a student reads (`autograder.mistakes`). Never in a student kit or the grading sandbox,
which hold the folder's __init__.py only.

Hidden cases of `static_batch_generate(step, requests, batch_size, eos_id) -> dict` (notebook 14):
greedy decoding of requests {"prompt_ids", "max_tokens"} in batches of batch_size, in request
order, each batch decoded until all of its requests have finished (eos_id, kept, or max_tokens
tokens), a finished request no longer fed; the accounting of `course_lib.batching`.

The step is a `course_lib.batching.SyntheticDecodeStep` (no model: the next token is a hash of
the slot's history; eos at a rate chosen per request), which raises on a use against the
`DecodeStep` contract; a batcher that misuses it gets {"misuse": the message} as its output.
Outputs: the report's six keys, the step's own counts (prefills, decode calls, slots fed),
whether the requests were left unchanged. Error cases must raise ValueError: their output is
{"raises": "ValueError"}, {"raises": "other"} or {"raises": None}. The cases:
`autograder/graded/_batching_cases/`.

What the cases are built to catch:

- every case: outputs in completion order, eos dropped (`eos_only_*`, `finish_at_prefill_*`),
  the last token at max_tokens lost or one too many (`max_tokens_only_*`), a finished request
  still fed (the step raises), the next batch started before the slowest request of a batch
  finishes (`long_tail_*`, `mixed_lengths_*`), the batches reordered (sorted by max_tokens);
- `partial_last_batch_*`, `more_slots_than_requests_*`: utilization over the requests of a batch
  instead of its batch_size slots;
- `every_request_one_token_*`, `no_requests_*`: no decode step at all (utilization 0.0, not a
  division by zero);
- `finish_at_prefill_*`: a request whose first token ends it, decoded anyway;
- `repeated_prompts_*`: outputs kept by prompt (equal prompts, equal outputs, but each counts);
- the `error_*` cases: batch_size < 1, a request without prompt ids, max_tokens < 1.
"""

from __future__ import annotations

import torch

from autograder.graded._batching_cases import batching_cases
from autograder.mistakes import edited, Mistake


# ---------------------------------------------------------------- the hidden cases
# each error case and the phrase of the reference's `Raises:` section that states it (tests/test_contracts.py)
RAISES = {
    "error_batch_size_0": "batch_size < 1",
    "error_batch_size_negative": "batch_size < 1",
    "error_empty_prompt_ids": "a request without prompt_ids",
    "error_max_tokens_0": "a request whose max_tokens is < 1",
    "error_max_tokens_negative": "a request whose max_tokens is < 1",
}


def make_inputs(gen: torch.Generator) -> list[tuple[str, dict]]:

    return batching_cases(gen)


# ---------------------------------------------------------------- the correct versions
BASE = """
    def static_batch_generate(step, requests, batch_size, eos_id):
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        for r in requests:
            if len(r["prompt_ids"]) == 0 or r["max_tokens"] < 1:
                raise ValueError("every request needs prompt_ids and max_tokens >= 1")
        outputs = [None] * len(requests)
        admitted_at = [0] * len(requests)
        steps = slot_steps = 0
        for start in range(0, len(requests), batch_size):
            rows = list(range(start, min(start + batch_size, len(requests))))
            out = {}
            active = []
            for slot, i in enumerate(rows):
                admitted_at[i] = steps
                tok = step.prefill(slot, list(requests[i]["prompt_ids"]))
                out[i] = [tok]
                if tok != eos_id and len(out[i]) < requests[i]["max_tokens"]:
                    active.append(slot)
            while active:
                toks = step.decode(active, [out[rows[s]][-1] for s in active])
                steps += 1
                slot_steps += len(active)
                still = []
                for s, tok in zip(active, toks):
                    out[rows[s]].append(tok)
                    if tok != eos_id and len(out[rows[s]]) < requests[rows[s]]["max_tokens"]:
                        still.append(s)
                active = still
            for i in rows:
                outputs[i] = out[i]
        utilization = slot_steps / (steps * batch_size) if steps > 0 else 0.0
        return {"outputs": outputs, "steps": steps, "prefills": len(requests), "slot_steps": slot_steps,
                "utilization": utilization, "admitted_at": admitted_at}
"""

CHECK_PREFILL = 'if tok != eos_id and len(out[i]) < requests[i]["max_tokens"]:'

CHECK_DECODE = 'if tok != eos_id and len(out[rows[s]]) < requests[rows[s]]["max_tokens"]:'

UTILIZATION = "utilization = slot_steps / (steps * batch_size) if steps > 0 else 0.0"

MIXED = ["mixed_lengths_12_requests_batch_4", "long_tail_16_requests_batch_4"]


CORRECT = {
    "slot_list_and_a_dict_of_rows": BASE,
    # a deque of batches, per-row done flags, the batch's rows fed while any is not done
    "deque_of_batches_done_flags": """
        from collections import deque
        def static_batch_generate(step, requests, batch_size, eos_id):
            if batch_size <= 0:
                raise ValueError(f"batch_size={batch_size}")
            if any(not r.get("prompt_ids") for r in requests):
                raise ValueError("a request has no prompt_ids")
            if any(r["max_tokens"] <= 0 for r in requests):
                raise ValueError("max_tokens must be positive")
            queue = deque(range(len(requests)))
            outputs = [[] for _ in requests]
            admitted = [0] * len(requests)
            n_steps = busy = 0
            while queue:
                batch = [queue.popleft() for _ in range(min(batch_size, len(queue)))]
                done = []
                for slot, idx in enumerate(batch):
                    admitted[idx] = n_steps
                    outputs[idx].append(step.prefill(slot, requests[idx]["prompt_ids"][:]))
                    done.append(outputs[idx][-1] == eos_id or requests[idx]["max_tokens"] == 1)
                while not all(done):
                    slots = [s for s in range(len(batch)) if not done[s]]
                    nxt = step.decode(slots, [outputs[batch[s]][-1] for s in slots])
                    n_steps += 1
                    busy += len(slots)
                    for s, t in zip(slots, nxt):
                        o = outputs[batch[s]]
                        o.append(t)
                        done[s] = t == eos_id or len(o) == requests[batch[s]]["max_tokens"]
            return dict(outputs=outputs, steps=n_steps, prefills=len(requests), slot_steps=busy,
                        utilization=(busy / n_steps / batch_size) if n_steps else 0.0, admitted_at=admitted)
    """,
    # the number of decode steps of a batch fixed in advance would need the model: a while loop
    # over a set of unfinished slots instead, the accounting gathered in a small class
    "set_of_unfinished_slots_and_a_counter_class": """
        class Counter:
            def __init__(self):
                self.steps = 0
                self.fed = 0
        def static_batch_generate(step, requests, batch_size, eos_id):
            if not isinstance(batch_size, int) or batch_size < 1:
                raise ValueError("batch_size")
            for k, r in enumerate(requests):
                if not r["prompt_ids"]:
                    raise ValueError(f"request {k}: empty prompt")
                if r["max_tokens"] < 1:
                    raise ValueError(f"request {k}: max_tokens")
            c = Counter()
            results = {}
            starts = {}
            for b in range(0, len(requests), batch_size):
                slot_of = {slot: b + slot for slot in range(min(batch_size, len(requests) - b))}
                gen = {}
                for slot, idx in slot_of.items():
                    starts[idx] = c.steps
                    gen[slot] = [step.prefill(slot, list(requests[idx]["prompt_ids"]))]
                def running(slot):
                    g = gen[slot]
                    return g[-1] != eos_id and len(g) < requests[slot_of[slot]]["max_tokens"]
                live = {s for s in slot_of if running(s)}
                while live:
                    order = sorted(live)
                    for s, t in zip(order, step.decode(order, [gen[s][-1] for s in order])):
                        gen[s].append(t)
                    c.steps += 1
                    c.fed += len(order)
                    live = {s for s in live if running(s)}
                for slot, idx in slot_of.items():
                    results[idx] = gen[slot]
            n = len(requests)
            return {"outputs": [results[i] for i in range(n)], "steps": c.steps, "prefills": n, "slot_steps": c.fed,
                    "utilization": c.fed / (c.steps * batch_size) if c.steps else 0.0,
                    "admitted_at": [starts[i] for i in range(n)]}
    """,
    # batches as slices through itertools; finished rows dropped from the fed lists (zip of
    # parallel lists), the utilization from the total of output lengths
    "islice_batches_parallel_lists": """
        from itertools import islice
        def static_batch_generate(step, requests, batch_size, eos_id):
            if batch_size < 1:
                raise ValueError("batch_size < 1")
            for r in requests:
                if not r["prompt_ids"]:
                    raise ValueError("prompt_ids empty")
                if not r["max_tokens"] >= 1:
                    raise ValueError("max_tokens < 1")
            it = iter(enumerate(requests))
            outputs, admitted_at, steps = {}, {}, 0
            while True:
                batch = list(islice(it, batch_size))
                if not batch:
                    break
                slots, idxs, lasts = [], [], []
                for slot, (i, r) in enumerate(batch):
                    admitted_at[i] = steps
                    t = step.prefill(slot, list(r["prompt_ids"]))
                    outputs[i] = [t]
                    if t != eos_id and r["max_tokens"] > 1:
                        slots.append(slot); idxs.append(i); lasts.append(t)
                while slots:
                    new = step.decode(slots, lasts)
                    steps += 1
                    keep = [(s, i, t) for s, i, t in zip(slots, idxs, new)
                            if not outputs[i].append(t) and t != eos_id and len(outputs[i]) < requests[i]["max_tokens"]]
                    slots, idxs, lasts = [list(x) for x in zip(*keep)] if keep else ([], [], [])
            n = len(requests)
            slot_steps = sum(len(outputs[i]) - 1 for i in range(n))
            return {"outputs": [outputs[i] for i in range(n)], "steps": steps, "prefills": n, "slot_steps": slot_steps,
                    "utilization": slot_steps / (batch_size * steps) if steps else 0.0,
                    "admitted_at": [admitted_at[i] for i in range(n)]}
    """,
}


# ---------------------------------------------------------------- the known mistakes
MISTAKES = {
    # finished rows still fed (a pad token's worth of work each, the way a GPU batch pads): the
    # contract keeps them idle, and the step refuses to decode a finished request
    "finished_rows_still_fed": Mistake(
        "keeps feeding rows whose request has finished instead of leaving them idle",
        edited(BASE, ("                active = still\n", "")),
        ["mixed_lengths_12_requests_batch_4", "eos_only_8_requests_batch_3"]),
    # eos ends the request but is not kept in its output
    "eos_not_in_the_output": Mistake(
        "ends a request at eos but leaves the eos token out of its output",
        edited(BASE, ("out[rows[s]].append(tok)", "out[rows[s]].append(tok) if tok != eos_id else None"),
                                         ("out[i] = [tok]", "out[i] = [tok] if tok != eos_id else []"),
                                         (CHECK_PREFILL, 'if tok != eos_id and len(out[i]) + 1 < requests[i]["max_tokens"]:')),
        ["eos_only_8_requests_batch_3", "finish_at_prefill_10_requests_batch_2"]),
    # one token short at max_tokens: the request stops after max_tokens - 1
    "last_token_at_max_tokens_lost": Mistake(
        "stops one token before max_tokens",
        edited(BASE, (CHECK_DECODE, 'if tok != eos_id and len(out[rows[s]]) < requests[rows[s]]["max_tokens"] - 1:')),
        ["max_tokens_only_9_requests_batch_3"]),
    # <= for <: one token past max_tokens (the step refuses to decode a request that has finished)
    "one_token_past_max_tokens": Mistake(
        "decodes one token past max_tokens (<= instead of <)",
        edited(BASE, (CHECK_DECODE, 'if tok != eos_id and len(out[rows[s]]) <= requests[rows[s]]["max_tokens"]:')),
        ["max_tokens_only_9_requests_batch_3"]),
    # a request finished by its prefill (eos first, or max_tokens 1) decoded anyway
    "prefill_token_not_checked": Mistake(
        "keeps decoding a request that finished at its prefill (eos first, or max_tokens of 1)",
        edited(BASE, (CHECK_PREFILL, "if True:")),
        ["finish_at_prefill_10_requests_batch_2", "every_request_one_token_6_requests_batch_4"]),
    # outputs appended as the requests finish
    "outputs_in_completion_order": Mistake(
        "returns the outputs in the order the requests finished instead of the requests' order",
        edited(BASE, ("outputs = [None] * len(requests)", "outputs = []"),
                                               ("                    out[rows[s]].append(tok)\n",
                                                "                    out[rows[s]].append(tok)\n"
                                                "                    if tok == eos_id or len(out[rows[s]]) == requests[rows[s]]['max_tokens']:\n"
                                                "                        outputs.append(out[rows[s]])\n"),
                                               ("            for i in rows:\n                outputs[i] = out[i]\n",
                                                "            outputs += [out[i] for i in rows if len(out[i]) == 1]\n")),
        MIXED),
    # the utilization over the slots busy in each step: 1.0 whatever the waste
    "utilization_over_busy_rows": Mistake(
        "divides the slot steps by themselves, so the utilization is always 1",
        edited(BASE, (UTILIZATION, "utilization = slot_steps / slot_steps if steps > 0 else 0.0")),
        MIXED),
    # the utilization over the rows of each batch: a last, smaller batch counted full
    "utilization_over_the_rows_of_a_batch": Mistake(
        "counts a last, smaller batch as a full one for the utilization",
        edited(BASE, ("        steps = slot_steps = 0\n", "        steps = slot_steps = capacity = 0\n"),
                                                        ("                steps += 1\n", "                steps += 1\n                capacity += len(rows)\n"),
                                                        (UTILIZATION, "utilization = slot_steps / capacity if steps > 0 else 0.0")),
        ["partial_last_batch_10_requests_batch_4", "more_slots_than_requests_3_requests_batch_8"]),
    "utilization_divides_by_zero": Mistake(
        "computes the utilization without a guard, so a run with no decode step divides by zero",
        edited(BASE, (UTILIZATION, "utilization = slot_steps / (steps * batch_size)")),
        ["every_request_one_token_6_requests_batch_4", "no_requests_batch_4"]),
    # each batch's prefill counted as a step
    "prefill_round_counted_as_a_step": Mistake(
        "counts each batch's prefill as a decode step",
        edited(BASE, ("            active = []\n", "            active = []\n            steps += 1\n")),
        MIXED),
    # batches of requests of similar max_tokens: fewer wasted slots, but not the contract's batches
    "batches_sorted_by_max_tokens": Mistake(
        "forms batches of requests sorted by max_tokens instead of consecutive requests",
        edited(BASE, ("rows = list(range(start, min(start + batch_size, len(requests))))",
                                                       "rows = sorted(range(len(requests)), key=lambda k: requests[k]['max_tokens'])[start:start + batch_size]")),
        MIXED),
    # the batch number, not the decode-step index
    "admitted_at_is_the_batch_number": Mistake(
        "records the batch number as admitted_at instead of the decode-step index",
        edited(BASE, ("admitted_at[i] = steps", "admitted_at[i] = start // batch_size")),
        MIXED),
    # the request's own prompt list used as the running sequence: the caller's requests grow
    "prompt_list_used_as_the_sequence": Mistake(
        "appends the new tokens to the request's own prompt list, changing the caller's requests",
        edited(BASE, ("out[i] = [tok]", "out[i] = [tok]\n                requests[i]['prompt_ids'].append(tok)")),
        MIXED),
    "no_value_errors": Mistake(
        "accepts batch_size < 1, an empty prompt or max_tokens < 1 instead of raising ValueError",
        edited(BASE, ("""        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        for r in requests:
            if len(r["prompt_ids"]) == 0 or r["max_tokens"] < 1:
                raise ValueError("every request needs prompt_ids and max_tokens >= 1")
""", "")),
        ["error_batch_size_negative", "error_max_tokens_0"]),
}
