"""Rollouts from an inference server (notebook 14): the client side of an OpenAI-compatible API.

A trainer that moves generation into a server (vLLM, SGLang) sends each prompt as token ids with
`n` samples and asks for each sampled token's log-prob (`"logprobs": 0`, and
`"return_tokens_as_token_ids": true` so that tokens come back as `"token_id:N"`, not as text a
tokenizer would have to map back). What comes back must become exactly the token ids and
log-probs the trainer scores: that is `rollouts_from_completion`. The transport (HTTP, retries,
weight sync) is `course_lib.rollouts.vllm_server.ServerEngine`.
"""

from __future__ import annotations

TOKEN_PREFIX = "token_id:"


def rollouts_from_completion(reply: dict, eos_token_id: int) -> list[dict]:
    """The samples of one `/v1/completions` reply, in sample order (`choice["index"]`, not the
    order the server listed them).

    reply["choices"][j]: {"index", "finish_reason", "logprobs": {"tokens": ["token_id:N", ...],
    "token_logprobs": [float, ...]}}. Returns, per choice, {"index": int, "token_ids": list[int],
    "log_probs": list[float], "finish_reason": "stop" | "length"}: an end-of-text token that ends
    the sample is dropped together with its log-prob (the trainer scores the text, which holds no
    eos); any finish other than "length" is "stop".

    Only a last token that is the eos is dropped (an eos inside a sample stays; a sample of the
    eos alone becomes empty). A reply whose `choices` list is empty has no samples and gives [];
    a reply without a `choices` list is an error.

    Raises:
        ValueError: a reply without a `choices` list.
        ValueError: a choice without log-probs (the request lacked `"logprobs"`).
        ValueError: a token not written `token_id:N` (the request lacked `"return_tokens_as_token_ids"`).
        ValueError: tokens and log-probs of different lengths.
        ValueError: two choices with one index.
    """
    if not isinstance(reply, dict) or not isinstance(reply.get("choices"), list):
        raise ValueError("reply: no 'choices' list (is it a /v1/completions reply?)")
    out = []
    for choice in sorted(reply["choices"], key=lambda c: c["index"]):
        lp = choice.get("logprobs")
        if not lp or "tokens" not in lp or "token_logprobs" not in lp:
            raise ValueError(f"choice {choice['index']}: no logprobs (ask for them with \"logprobs\": 0)")
        tokens, log_probs = lp["tokens"], lp["token_logprobs"]
        if len(tokens) != len(log_probs):
            raise ValueError(f"choice {choice['index']}: {len(tokens)} tokens but {len(log_probs)} log-probs")
        ids = []
        for t in tokens:
            if not (isinstance(t, str) and t.startswith(TOKEN_PREFIX) and t[len(TOKEN_PREFIX):].isdigit()):
                raise ValueError(f"choice {choice['index']}: token {t!r} is not 'token_id:N' "
                                 "(ask with \"return_tokens_as_token_ids\": true)")
            ids.append(int(t[len(TOKEN_PREFIX):]))
        log_probs = [float(x) for x in log_probs]
        if ids and ids[-1] == eos_token_id:
            ids, log_probs = ids[:-1], log_probs[:-1]
        reason = "length" if choice.get("finish_reason") == "length" else "stop"
        out.append({"index": int(choice["index"]), "token_ids": ids, "log_probs": log_probs, "finish_reason": reason})
    if len({r["index"] for r in out}) != len(out):
        raise ValueError("reply: two choices with the same index")
    return out
