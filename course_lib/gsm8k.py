"""GSM8K-style data: loading jsonl splits, extracting `#### N` answers, r1_zero formatting.

The same functions serve real GSM8K (`openai/gsm8k`, config `main`) and the course's embedded
arithmetic data set: both are folders of `train.jsonl` / `test.jsonl` whose lines are
`{"question": str, "answer": str}` with the final answer on a last line `#### N`.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Callable

from .paths import DATA_DIR, PROMPTS_DIR

GSM8K_HUB_NAME = "openai/gsm8k"
GSM8K_HUB_CONFIG = "main"
REQUIRED_FIELDS = ("question", "answer")

# the text after the LAST "####" (the look-ahead: no "####" follows), stripped; the same marker
# at which gsm8k_to_r1_zero cuts the reasoning
_FINAL_ANSWER = re.compile(r"####(?!.*####)\s*(.+?)\s*$", re.DOTALL)


class DataFormatError(ValueError):
    """A data file is malformed; the message names the file and the line."""


def read_jsonl(path: str | os.PathLike, required_fields: tuple[str, ...] = REQUIRED_FIELDS,
               check: Callable[[dict], str | None] | None = None) -> list[dict]:
    """Read a jsonl file of objects, each holding `required_fields` as strings (and passing `check`,
    which returns what is wrong with a record, or None).

    Blank lines are skipped. Any other malformed line raises `DataFormatError` naming the file
    and the 1-based line number, so a bad record never silently disappears from a run.
    """
    path = Path(path)
    records = []
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as e:
                raise DataFormatError(f"{path}:{lineno}: not valid JSON ({e.msg} at column {e.colno})") from None
            if not isinstance(record, dict):
                raise DataFormatError(f"{path}:{lineno}: expected a JSON object, got {type(record).__name__}")
            for field in required_fields:
                if field not in record:
                    raise DataFormatError(f"{path}:{lineno}: missing field {field!r}")
                if not isinstance(record[field], str):
                    raise DataFormatError(f"{path}:{lineno}: field {field!r} must be a string")
            problem = check(record) if check is not None else None
            if problem:
                raise DataFormatError(f"{path}:{lineno}: {problem}")
            records.append(record)
    return records


def load_gsm8k(split: str, data_dir: str | os.PathLike | None = None) -> list[dict]:
    """Load one split ("train" or "test") of GSM8K as a list of {"question", "answer"} dicts.

    `data_dir` is a local folder holding `{split}.jsonl` (real GSM8K, the embedded arithmetic
    set, or any data set of the same shape). Without it, the `openai/gsm8k` hub data set is
    used when it can be reached. When neither works, the error names both.
    """
    if data_dir is not None:
        path = Path(data_dir) / f"{split}.jsonl"
        if not path.is_file():
            raise FileNotFoundError(f"no {split}.jsonl in {data_dir} (looked for {path})")
        return read_jsonl(path)
    try:
        import datasets

        ds = datasets.load_dataset(GSM8K_HUB_NAME, GSM8K_HUB_CONFIG, split=split)
    except Exception as e:  # offline, no `datasets`, unknown split: all end here
        raise FileNotFoundError(
            f"cannot load GSM8K split {split!r}: no local folder was given "
            f"(load_gsm8k({split!r}, data_dir=FOLDER) with FOLDER/{split}.jsonl) and the hub data set "
            f"{GSM8K_HUB_NAME!r} (config {GSM8K_HUB_CONFIG!r}) could not be loaded: {type(e).__name__}: {e}"
        ) from e
    return [{"question": r["question"], "answer": r["answer"]} for r in ds]


def load_problems(source: str, split: str) -> list[dict]:
    """Load a split by name: "arith" (embedded data, `data/arith/`), "gsm8k" (hub), or a folder."""
    if source == "arith":
        return load_gsm8k(split, DATA_DIR / "arith")
    if source == "gsm8k":
        return load_gsm8k(split, os.environ.get("GSM8K_DIR") or None)
    return load_gsm8k(split, source)


def extract_gsm8k_answer(answer_text: str) -> str:
    """The final answer after the last `####`, with thousands commas removed: "...\\n#### 1,080" -> "1080".

    The answer is all the text after the last `####` (numbers before it, calculator notes
    included, do not count), without the spaces, tabs and newlines around it; every comma goes
    ("1,234,567" -> "1234567"), a sign and a decimal point stay ("-7", "2.25").

    Raises:
        ValueError: no `####` followed by an answer.
    """
    match = _FINAL_ANSWER.search(answer_text)
    if match is None:
        raise ValueError(f"no '#### N' final answer in {answer_text[-80:]!r}")
    return match.group(1).strip().replace(",", "")


def r1_zero_prompt_template() -> str:
    """The r1_zero prompt with a `{question}` slot; it ends with "Assistant: <think>"."""
    return (PROMPTS_DIR / "r1_zero.prompt").read_text(encoding="utf-8")


def format_r1_zero_prompt(question: str, template: str | None = None) -> str:
    return (template or r1_zero_prompt_template()).replace("{question}", question)


def gsm8k_to_r1_zero(example: dict, template: str | None = None) -> dict:
    """Turn a {"question", "answer"} record into r1_zero `prompt`, `output` and `ground_truth`.

        prompt       = format_r1_zero_prompt(question, template)    the question as it is, not stripped
        ground_truth = extract_gsm8k_answer(answer)                 "#### 1,080" -> "1080"
        output       = " " + reasoning + " </think> <answer> " + ground_truth + " </answer>"

    The reasoning is the answer text before the last `####` (calculator notes and any earlier
    `####` line included), stripped of surrounding whitespace: it stays the thinking, so
    `prompt + output` reads exactly like the example inside the prompt: "<think> reasoning
    </think> <answer> N </answer>". The output starts with a space because the prompt ends with
    "<think>" and the two are tokenized separately.

    Args:
        example: {"question", "answer"}, the answer ending in a `#### N` line.
        template: a prompt with a "{question}" slot; None: the course's r1_zero prompt.
    Returns:
        {"prompt", "output", "ground_truth"}, three strings.
    Raises:
        ValueError: an answer without `#### N`.
    """
    answer_text = example["answer"]
    cut = answer_text.rfind("####")
    if cut < 0:
        raise ValueError(f"no '#### N' final answer in {answer_text[-80:]!r}")
    ground_truth = extract_gsm8k_answer(answer_text)
    reasoning = answer_text[:cut].strip()
    output = f" {reasoning} </think> <answer> {ground_truth} </answer>"
    return {
        "prompt": format_r1_zero_prompt(example["question"], template),
        "output": output,
        "ground_truth": ground_truth,
    }


def as_r1_zero(records: list[dict], need: tuple[str, ...] = ("prompt", "ground_truth")) -> list[dict]:
    """Training or evaluation records in the r1_zero form, whichever form they came in.

    A GSM8K record ({"question", "answer"}) is converted with `gsm8k_to_r1_zero`; an r1_zero
    record (it has a "prompt") passes through unchanged and must hold every field in `need`
    ("output" for SFT, "ground_truth" for evaluation and GRPO). Anything else is an error that
    names the record's index and what it lacks.
    """
    out = []
    for i, record in enumerate(records):
        if "prompt" in record:
            missing = [f for f in need if f not in record]
            if missing:
                raise DataFormatError(f"record {i}: an r1_zero record without {', '.join(map(repr, missing))}")
            out.append(record)
        elif "question" in record and "answer" in record:
            out.append(gsm8k_to_r1_zero(record))
        else:
            raise DataFormatError(f"record {i}: neither a GSM8K record (question, answer) nor an r1_zero one "
                                  f"(prompt, {', '.join(need[1:]) or 'output'}); it has {sorted(record)}")
    return out
