"""The grader's side of `rollouts_from_completion` (notebook 14): how its hidden cases are drawn, the
correct versions that must earn full marks and the known mistakes that must lose them, each with the
sentence a student reads (`autograder.mistakes`). Never in a student kit or the grading sandbox,
which hold the folder's __init__.py only.

Hidden cases of `rollouts_from_completion(reply, eos_token_id) -> list[dict]` (notebook 14): the
samples of a `/v1/completions` reply as the trainer takes them. Outputs are exact: {"samples"}.
Error cases must raise ValueError (or a subclass): {"raises": "ValueError"}, "other" or None.

Replies are drawn: n of 1 to 8 samples listed in a shuffled order (a server answers in the order
samples finish), of 0 to 40 tokens, ending with the end-of-text token or not, finishing "stop",
"length" or "abort"; token ids and log-probs drawn (log-probs as a server writes them, Python
floats). What the cases are built to catch: samples in the listed order instead of by index, the
eos kept, the last token dropped when it is not the eos (or dropped with the wrong log-prob), an
eos in the middle of a sample dropped, finish reasons passed through raw, ids read from the
decoded text, an empty sample (eos only); and the errors: a reply without choices, a choice
without log-probs, tokens written as text, tokens and log-probs of different lengths, a repeated
index.
"""

from __future__ import annotations

import torch

from autograder.mistakes import edited, Mistake


# ---------------------------------------------------------------- the hidden cases
# each error case and the phrase of the reference's `Raises:` section that states it (tests/test_contracts.py)
RAISES = {
    "error_no_choices": "a reply without a `choices` list",
    "error_no_logprobs": "a choice without log-probs",
    "error_tokens_as_text": "a token not written `token_id:N`",
    "error_lengths_differ": "tokens and log-probs of different lengths",
    "error_repeated_index": "two choices with one index",
}
EOS = 1


def make_inputs(gen: torch.Generator) -> list[tuple[str, dict]]:
    def rint(lo, hi):
        return int(torch.randint(lo, hi, (), generator=gen))

    def sample(length, eos_end, reason, eos_inside=False):
        ids = [rint(2, 822) for _ in range(length)]
        if eos_inside and length > 2:
            ids[length // 2] = EOS
        if eos_end:
            ids.append(EOS)
        lps = [-float(torch.rand((), generator=gen, dtype=torch.float64)) * 8 for _ in ids]
        return {"logprobs": {"tokens": [f"token_id:{i}" for i in ids], "token_logprobs": lps,
                             "text_offset": list(range(len(ids))), "top_logprobs": None}, "finish_reason": reason,
                "text": "(decoded text)", "stop_reason": None}

    def reply(samples, shuffle=True):
        order = torch.randperm(len(samples), generator=gen).tolist() if shuffle else list(range(len(samples)))
        return {"id": "cmpl-x", "object": "text_completion", "model": "policy",
                "choices": [{"index": j, **samples[j]} for j in order]}

    def case(r, eos=EOS, error=False):
        return {"reply": r, "eos_token_id": eos, "expect_error": error}

    # samples that end with the eos and samples that do not, on every draw (listed in another order by `reply`)
    ends = [True, False] + [bool(rint(0, 2)) for _ in range(6)]
    mixed = [sample(rint(3, 40), eos_end=end, reason="stop") for end in ends]
    lengths = [sample(rint(5, 30), eos_end=False, reason="length") for _ in range(3)] + \
              [sample(rint(5, 30), eos_end=True, reason="stop") for _ in range(3)]
    bad_text = sample(5, eos_end=True, reason="stop")
    bad_text["logprobs"]["tokens"] = [" five", " plus", " two", " is", "<|endoftext|>"]
    short = sample(6, eos_end=False, reason="stop")
    short["logprobs"]["token_logprobs"] = short["logprobs"]["token_logprobs"][:-1]
    no_lp = sample(4, eos_end=True, reason="stop")
    no_lp["logprobs"] = None
    twice = reply([sample(4, True, "stop"), sample(5, True, "stop")], shuffle=False)
    twice["choices"][1]["index"] = 0
    return [
        ("eight_samples_listed_out_of_order", case(reply(mixed))),
        ("one_sample_ending_with_eos", case(reply([sample(rint(5, 30), True, "stop")]))),
        ("stopped_by_a_stop_string_no_eos", case(reply([sample(rint(5, 30), False, "stop") for _ in range(3)]))),
        ("cut_at_max_tokens", case(reply(lengths))),
        ("eos_inside_a_sample_is_kept", case(reply([sample(12, True, "stop", eos_inside=True),
                                                    sample(9, False, "length", eos_inside=True)]))),
        ("empty_samples", case(reply([sample(0, True, "stop"), sample(0, False, "length"), sample(3, True, "stop")]))),
        ("aborted_sample_is_a_stop", case(reply([sample(7, False, "abort"), sample(6, True, "stop")]))),
        ("another_eos_id", case(reply([sample(10, True, "stop"), sample(8, False, "stop")]), eos=EOS + 6)),
        ("no_samples", case(reply([]))),
        ("error_no_choices", case({"id": "cmpl-x", "object": "error", "message": "bad request"}, error=True)),
        ("error_no_logprobs", case(reply([sample(4, True, "stop"), no_lp]), error=True)),
        ("error_tokens_as_text", case(reply([bad_text]), error=True)),
        ("error_lengths_differ", case(reply([short]), error=True)),
        ("error_repeated_index", case(twice, error=True)),
    ]


# ---------------------------------------------------------------- the correct versions
BASE = """
    def rollouts_from_completion(reply, eos_token_id):
        if not isinstance(reply, dict) or "choices" not in reply:
            raise ValueError("no choices")
        out = []
        for c in sorted(reply["choices"], key=lambda c: c["index"]):
            lp = c.get("logprobs")
            if not lp:
                raise ValueError("no logprobs")
            toks, lps = lp["tokens"], lp["token_logprobs"]
            if len(toks) != len(lps):
                raise ValueError("lengths differ")
            ids = []
            for t in toks:
                if not t.startswith("token_id:"):
                    raise ValueError("not token_id:N")
                ids.append(int(t.split(":")[1]))
            lps = [float(x) for x in lps]
            if ids and ids[-1] == eos_token_id:
                ids, lps = ids[:-1], lps[:-1]
            out.append({"index": c["index"], "token_ids": ids, "log_probs": lps,
                        "finish_reason": "length" if c["finish_reason"] == "length" else "stop"})
        if len({o["index"] for o in out}) != len(out):
            raise ValueError("repeated index")
        return out
"""

ORDER = 'for c in sorted(reply["choices"], key=lambda c: c["index"]):'

TRIM = "ids, lps = ids[:-1], lps[:-1]"


CORRECT = {
    "sorted_then_parse": BASE,
    # a dict by index first (duplicates caught on insert), then read in index order
    "dict_by_index": """
        import re
        TOKEN = re.compile(r"token_id:(\\d+)")
        def rollouts_from_completion(reply, eos_token_id):
            try:
                choices = reply["choices"]
            except (KeyError, TypeError):
                raise ValueError("reply has no choices") from None
            by_index = {}
            for ch in choices:
                if ch["index"] in by_index:
                    raise ValueError("index twice")
                logprobs = ch.get("logprobs") or {}
                tokens, values = logprobs.get("tokens"), logprobs.get("token_logprobs")
                if tokens is None or values is None:
                    raise ValueError("ask for logprobs")
                if len(tokens) != len(values):
                    raise ValueError("misaligned")
                matches = [TOKEN.fullmatch(t) for t in tokens]
                if not all(matches):
                    raise ValueError("tokens must be token_id:N")
                ids = [int(m.group(1)) for m in matches]
                keep = len(ids) - 1 if ids and ids[-1] == eos_token_id else len(ids)
                by_index[ch["index"]] = {"index": ch["index"], "token_ids": ids[:keep],
                                         "log_probs": [float(v) for v in values[:keep]],
                                         "finish_reason": {"length": "length"}.get(ch.get("finish_reason"), "stop")}
            return [by_index[i] for i in sorted(by_index)]
    """,
    # pairs of (id, log-prob) zipped and trimmed together; a loop over positions for the order
    "zip_pairs_and_pop": """
        def rollouts_from_completion(reply, eos_token_id):
            if "choices" not in reply:
                raise ValueError("no choices in the reply")
            choices = list(reply["choices"])
            indices = [c["index"] for c in choices]
            if len(set(indices)) != len(indices):
                raise ValueError("duplicate index")
            result = []
            for index in sorted(indices):
                c = choices[indices.index(index)]
                if c.get("logprobs") is None:
                    raise ValueError("logprobs missing")
                pairs = []
                if len(c["logprobs"]["tokens"]) != len(c["logprobs"]["token_logprobs"]):
                    raise ValueError("tokens and logprobs differ in length")
                for tok, val in zip(c["logprobs"]["tokens"], c["logprobs"]["token_logprobs"]):
                    prefix, _, number = tok.partition("token_id:")
                    if prefix or not number.isdigit():
                        raise ValueError(f"bad token {tok!r}")
                    pairs.append((int(number), float(val)))
                if pairs and pairs[-1][0] == eos_token_id:
                    pairs.pop()
                reason = c.get("finish_reason")
                result.append({"index": index, "token_ids": [p[0] for p in pairs], "log_probs": [p[1] for p in pairs],
                               "finish_reason": "length" if reason == "length" else "stop"})
            return result
    """,
    # preallocated slots filled by index
    "slots_by_index": """
        def rollouts_from_completion(reply, eos_token_id):
            choices = reply.get("choices") if isinstance(reply, dict) else None
            if choices is None:
                raise ValueError("not a completions reply")
            slots = [None] * len(choices)
            for c in choices:
                i = c["index"]
                if slots[i] is not None:
                    raise ValueError("two choices share an index")
                lp = c.get("logprobs")
                if not isinstance(lp, dict):
                    raise ValueError("no logprobs")
                n = len(lp["tokens"])
                if n != len(lp["token_logprobs"]):
                    raise ValueError("lengths")
                ids = []
                for t in lp["tokens"]:
                    if not (isinstance(t, str) and t[:9] == "token_id:" and t[9:].isdigit()):
                        raise ValueError("token format")
                    ids.append(int(t[9:]))
                end = n - 1 if n and ids[-1] == eos_token_id else n
                slots[i] = {"index": i, "token_ids": ids[:end], "log_probs": list(map(float, lp["token_logprobs"][:end])),
                            "finish_reason": "length" if c["finish_reason"] == "length" else "stop"}
            return slots
    """,
}

# the fresh draws of the cases the many-draws check holds every version to (tests/test_graded.py; 40 by default)
DRAWS = 20


# ---------------------------------------------------------------- the known mistakes
MISTAKES = {
    "listed_order": Mistake(
        "keeps the choices in the order listed instead of sorting them by their index",
        edited(BASE, (ORDER, 'for c in reply["choices"]:')),
        ["eight_samples_listed_out_of_order"]),
    "eos_kept": Mistake(
        "keeps the final eos token (and its log-prob) in a sample",
        edited(BASE, ("            if ids and ids[-1] == eos_token_id:\n                ids, lps = ids[:-1], lps[:-1]\n", "")),
        ["one_sample_ending_with_eos", "eight_samples_listed_out_of_order"]),
    "last_token_always_dropped": Mistake(
        "drops a sample's last token whatever it is, not only an eos",
        edited(BASE, ("if ids and ids[-1] == eos_token_id:", "if ids:")),
        ["stopped_by_a_stop_string_no_eos", "cut_at_max_tokens"]),
    # the token dropped, its log-prob kept: the log-probs no longer line up with the tokens
    "eos_log_prob_kept": Mistake(
        "drops the final eos token but keeps its log-prob, so the log-probs no longer line up with the tokens",
        edited(BASE, (TRIM, "ids = ids[:-1]")),
        ["one_sample_ending_with_eos"]),
    "every_eos_removed": Mistake(
        "removes every eos token of a sample instead of only a final one",
        edited(BASE, ("if ids and ids[-1] == eos_token_id:\n                ids, lps = ids[:-1], lps[:-1]",
                                            "keep = [k for k, i in enumerate(ids) if i != eos_token_id]\n"
                                            "            ids, lps = [ids[k] for k in keep], [lps[k] for k in keep]")),
        ["eos_inside_a_sample_is_kept"]),
    "finish_reason_passed_through": Mistake(
        'passes the server\'s finish_reason through instead of mapping it to "length" or "stop"',
        edited(BASE, ('"finish_reason": "length" if c["finish_reason"] == "length" else "stop"',
                                                       '"finish_reason": c["finish_reason"]')),
        ["aborted_sample_is_a_stop"]),
    "eos_id_hard_coded": Mistake(
        "drops a hard-coded token id instead of the eos_token_id it is given",
        edited(BASE, ("if ids and ids[-1] == eos_token_id:", "if ids and ids[-1] == 1:")),
        ["another_eos_id"]),
    "lengths_not_checked": Mistake(
        "accepts tokens and log-probs of different lengths instead of raising ValueError",
        edited(BASE, ('            if len(toks) != len(lps):\n                raise ValueError("lengths differ")\n', "")),
        ["error_lengths_differ"]),
    "repeated_index_not_checked": Mistake(
        "accepts two choices with the same index instead of raising ValueError",
        edited(BASE, ('        if len({o["index"] for o in out}) != len(out):\n'
                                                     '            raise ValueError("repeated index")\n', "")),
        ["error_repeated_index"]),
}
