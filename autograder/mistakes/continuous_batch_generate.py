"""The known mistakes of `continuous_batch_generate` (notebook 14): the catalogue `autograder.mistakes` describes."""

from __future__ import annotations

from autograder.mistakes import Mistake, edited


BASE = """
    from collections import deque
    def continuous_batch_generate(step, requests, batch_size, eos_id):
        bad = [k for k, r in enumerate(requests) if not r["prompt_ids"] or r["max_tokens"] < 1]
        if batch_size < 1 or bad:
            raise ValueError(f"batch_size {batch_size}; requests without prompt ids or max_tokens >= 1: {bad}")
        waiting = deque(range(len(requests)))
        outputs = [[] for _ in requests]
        admitted_at = [0] * len(requests)
        slots = {}
        free = list(range(batch_size))
        steps = slot_steps = 0
        while True:
            while free and waiting:
                slot = free.pop()
                i = waiting.popleft()
                admitted_at[i] = steps
                tok = step.prefill(slot, list(requests[i]["prompt_ids"]))
                outputs[i].append(tok)
                if tok == eos_id or len(outputs[i]) >= requests[i]["max_tokens"]:
                    free.append(slot)
                else:
                    slots[slot] = i
            if not slots:
                break
            busy = list(slots)
            toks = step.decode(busy, [outputs[slots[s]][-1] for s in busy])
            steps += 1
            slot_steps += len(busy)
            for s, tok in zip(busy, toks):
                i = slots[s]
                outputs[i].append(tok)
                if tok == eos_id or len(outputs[i]) >= requests[i]["max_tokens"]:
                    del slots[s]
                    free.append(s)
        utilization = slot_steps / (steps * batch_size) if steps else 0.0
        return {"outputs": outputs, "steps": steps, "prefills": len(requests), "slot_steps": slot_steps,
                "utilization": utilization, "admitted_at": admitted_at}
"""

ADMIT = "            while free and waiting:\n"

FINISHED_AT_PREFILL = 'if tok == eos_id or len(outputs[i]) >= requests[i]["max_tokens"]:\n                    free.append(slot)'

FINISHED = '                if tok == eos_id or len(outputs[i]) >= requests[i]["max_tokens"]:\n                    del slots[s]'

UTILIZATION = "utilization = slot_steps / (steps * batch_size) if steps else 0.0"

MIXED = ["mixed_lengths_12_requests_batch_4", "long_tail_16_requests_batch_4"]

MISTAKES = {
    # static batching: the free slots refilled only once every slot is free
    "admits_only_when_the_batch_drains": Mistake(
        "refills free slots only once every slot is free: static batching, not continuous",
        edited(BASE, (ADMIT, "            while free and waiting and not slots:\n")),
        MIXED),
    # one new request per decode step, however many slots freed
    "one_admission_per_step": Mistake(
        "admits one waiting request per decode step however many slots are free",
        edited(BASE, (ADMIT, "            admitted_now = 0\n"
                                                        "            while free and waiting and (steps == 0 or admitted_now < 1):\n"
                                                        "                admitted_now += 1\n")),
        ["simultaneous_finishes_9_requests_batch_3"]),
    # the newest request first (a stack), not request order
    "last_in_first_out": Mistake(
        "admits the newest waiting request first (a stack) instead of in request order",
        edited(BASE, ("i = waiting.popleft()", "i = waiting.pop()")),
        MIXED),
    "eos_not_in_the_output": Mistake(
        "leaves the eos token out of a request's output",
        edited(BASE, ("                outputs[i].append(tok)\n                if tok == eos_id or len(outputs[i]) >= requests[i][\"max_tokens\"]:\n                    del",
                                                "                if tok != eos_id:\n                    outputs[i].append(tok)\n                if tok == eos_id or len(outputs[i]) >= requests[i][\"max_tokens\"]:\n                    del")),
        ["eos_only_8_requests_batch_3", "mixed_lengths_12_requests_batch_4"]),
    "last_token_at_max_tokens_lost": Mistake(
        "stops one token before max_tokens",
        edited(BASE, (FINISHED, '                if tok == eos_id or len(outputs[i]) >= requests[i]["max_tokens"] - 1:\n                    del slots[s]')),
        ["max_tokens_only_9_requests_batch_3"]),
    # > for >=: one token past max_tokens (the step refuses to decode a request that has finished)
    "one_token_past_max_tokens": Mistake(
        "decodes one token past max_tokens (> instead of >=)",
        edited(BASE, (FINISHED, '                if tok == eos_id or len(outputs[i]) > requests[i]["max_tokens"]:\n                    del slots[s]')),
        ["max_tokens_only_9_requests_batch_3"]),
    # a request that finishes at its prefill still takes its slot: decoded anyway
    "finished_at_prefill_still_decoded": Mistake(
        "keeps decoding a request that finished at its prefill (eos or max_tokens of 1)",
        edited(BASE, (FINISHED_AT_PREFILL, "if False:\n                    free.append(slot)")),
        ["finish_at_prefill_10_requests_batch_2"]),
    # ... or its slot left empty until the next decode step
    "slot_freed_at_prefill_left_empty_a_step": Mistake(
        "leaves a slot freed at a prefill empty until the next decode step instead of refilling it at once",
        edited(BASE, ("        free = list(range(batch_size))\n",
                                                                  "        free = list(range(batch_size))\n        later = []\n"),
                                                           (FINISHED_AT_PREFILL, 'if tok == eos_id or len(outputs[i]) >= requests[i]["max_tokens"]:\n                    later.append(slot)'),
                                                           ("            if not slots:\n",
                                                            "            free += later\n            later = []\n            if not slots and not (free and waiting):\n                break\n            if not slots:\n                continue\n")),
        ["finish_at_prefill_10_requests_batch_2"]),
    # a freed slot given its new request by feeding the prompt to decode, as if the cache were
    # the new request's (the step refuses: that slot's request has finished)
    "new_request_decoded_into_the_old_cache": Mistake(
        "feeds a new request's prompt to decode in a freed slot instead of prefilling it",
        edited(BASE, ("                tok = step.prefill(slot, list(requests[i][\"prompt_ids\"]))\n",
                                                                 "                if steps == 0:\n"
                                                                 "                    tok = step.prefill(slot, list(requests[i][\"prompt_ids\"]))\n"
                                                                 "                else:\n"
                                                                 "                    tok = step.decode([slot], [requests[i][\"prompt_ids\"][-1]])[0]\n")),
        MIXED),
    # the slot's token buffer kept from the request before: the new output starts with the old one
    "slot_buffer_not_reset": Mistake(
        "keeps a slot's token buffer from its previous request, so the new output starts with the old one",
        edited(BASE, ("        slots = {}\n", "        slots = {}\n        buffers = {}\n"),
                                         ("                outputs[i].append(tok)\n                if tok == eos_id or len(outputs[i]) >= requests[i][\"max_tokens\"]:\n                    free",
                                          "                outputs[i] = buffers.setdefault(slot, [])\n                outputs[i].append(tok)\n                if tok == eos_id or len(outputs[i]) >= requests[i][\"max_tokens\"]:\n                    free")),
        MIXED),
    "outputs_in_completion_order": Mistake(
        "returns the outputs in the order the requests finished instead of the requests' order",
        edited(BASE, ("        return {\"outputs\": outputs,", "        done = sorted(range(len(requests)), key=lambda k: admitted_at[k] + len(outputs[k]))\n"
                                                                                            "        return {\"outputs\": [outputs[k] for k in done],")),
        MIXED),
    # admitted_at one step early: the index of the decode step before the admission
    "admitted_at_one_step_early": Mistake(
        "records admitted_at one decode step early",
        edited(BASE, ("admitted_at[i] = steps", "admitted_at[i] = max(steps - 1, 0)")),
        MIXED),
    "utilization_over_busy_rows": Mistake(
        "divides the slot steps by themselves, so the utilization is always 1",
        edited(BASE, (UTILIZATION, "utilization = slot_steps / slot_steps if steps else 0.0")),
        MIXED),
    # the slots a request could fill: fewer requests than slots counted as a smaller batch
    "utilization_over_min_of_slots_and_requests": Mistake(
        "divides by min(batch_size, number of requests) instead of batch_size for the utilization",
        edited(BASE, (UTILIZATION, "utilization = slot_steps / (steps * min(batch_size, len(requests))) if steps else 0.0")),
        ["more_slots_than_requests_3_requests_batch_8"]),
    "utilization_divides_by_zero": Mistake(
        "computes the utilization without a guard, so a run with no decode step divides by zero",
        edited(BASE, (UTILIZATION, "utilization = slot_steps / (steps * batch_size)")),
        ["every_request_one_token_6_requests_batch_4", "no_requests_batch_4"]),
    "no_value_errors": Mistake(
        "accepts an empty prompt or max_tokens below 1 instead of raising ValueError",
        edited(BASE, ("""        bad = [k for k, r in enumerate(requests) if not r["prompt_ids"] or r["max_tokens"] < 1]
        if batch_size < 1 or bad:
            raise ValueError(f"batch_size {batch_size}; requests without prompt ids or max_tokens >= 1: {bad}")
""", "")),
        ["error_empty_prompt_ids", "error_max_tokens_0"]),
}
