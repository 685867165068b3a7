"""How the judge calls `render_conversation(messages, template="course", thinking=None,
add_generation_prompt=True) -> str` on a hidden case: `call` (fresh copies of the case's inputs in,
named outputs out) and its settings. Public: a student kit and the grading sandbox hold this file;
the cases, the correct versions and the known mistakes are grader.py's.
"""

from __future__ import annotations

GRADED = "render_conversation"


def call(fn, inputs: dict) -> dict:
    messages = [dict(m) for m in inputs["messages"]]
    if inputs["expect_error"]:
        try:
            fn(messages, **inputs["kwargs"])
        except Exception as e:  # noqa: BLE001 - which exception is the output
            return {"raises": "ValueError" if isinstance(e, ValueError) else "other"}
        return {"raises": None}
    return {"text": fn(messages, **inputs["kwargs"])}
