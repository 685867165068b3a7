"""How the judge calls `assistant_loss_mask(tokenizer, messages, template="course", thinking=None) ->
dict` on a hidden case: `call` (fresh copies of the case's inputs in, named outputs out) and its
settings. Public: a student kit and the grading sandbox hold this file; the cases, the correct
versions and the known mistakes are grader.py's.
"""

from __future__ import annotations

from autograder.suite_api import course_tokenizer

GRADED = "assistant_loss_mask"
TRIPWIRE = ["assistant_loss_mask", "render_conversation"]
WARM = ("transformers", "tokenizers")  # imported by a judge runner started ahead (autograder.judge)


def call(fn, inputs: dict) -> dict:
    messages = [dict(m) for m in inputs["messages"]]
    tokenizer = course_tokenizer()
    if inputs["expect_error"]:
        try:
            fn(tokenizer, messages, **inputs["kwargs"])
        except Exception as e:  # noqa: BLE001 - which exception is the output
            return {"raises": "ValueError" if isinstance(e, ValueError) else "other"}
        return {"raises": None}
    out = fn(tokenizer, messages, **inputs["kwargs"])
    return {"input_ids": out["input_ids"], "loss_mask": out["loss_mask"]}
