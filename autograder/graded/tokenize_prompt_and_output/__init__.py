"""How the judge calls `tokenize_prompt_and_output` on a hidden case: `call` (fresh copies of the
case's inputs in, named outputs out) and its settings. Public: a student kit and the grading sandbox
hold this file; the cases, the correct versions and the known mistakes are grader.py's.
"""

from __future__ import annotations

from autograder.suite_api import course_tokenizer

GRADED = "tokenize_prompt_and_output"
WARM = ('transformers', 'tokenizers')  # imported by a judge runner started ahead (autograder.judge)
KEYS = ("input_ids", "labels", "response_mask")


def _tokenizer(pad_token, special=None):
    """The course tokenizer; `pad_token` replaces its pad token ("none": no pad token at all);
    `special="bos"` / `"bos_eos"` makes it add <|im_start|> before (and <|endoftext|> after)
    every text unless called with add_special_tokens=False."""
    import copy

    from tokenizers import processors

    tok = copy.deepcopy(course_tokenizer())
    if pad_token == "none":
        tok.pad_token = None
    elif pad_token is not None:
        tok.pad_token = pad_token
    if special:
        bos, eos = "<|im_start|>", "<|endoftext|>"
        single = f"{bos} $A" + (f" {eos}" if special == "bos_eos" else "")
        tok.backend_tokenizer.post_processor = processors.TemplateProcessing(
            single=single, pair=f"{single} $B", special_tokens=[(t, tok.convert_tokens_to_ids(t)) for t in (bos, eos)])
    return tok


def call(fn, inputs: dict) -> dict:
    tokenizer = _tokenizer(inputs["pad_token"], inputs.get("special"))
    try:
        out = fn(list(inputs["prompts"]), list(inputs["outputs"]), tokenizer)
    except ValueError:
        return {"raises_value_error": True}
    if not isinstance(out, dict):
        return {"returned a dict": False}
    return {**{k: out[k] for k in KEYS if k in out}, "raises_value_error": False}
