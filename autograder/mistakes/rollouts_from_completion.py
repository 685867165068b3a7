"""The known mistakes of `rollouts_from_completion` (notebook 14): the catalogue `autograder.mistakes` describes."""

from __future__ import annotations

from autograder.mistakes import Mistake, edited


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
