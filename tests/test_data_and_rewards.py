"""The r1_zero reward, the data loaders, and errors on malformed data. (The graded functions of
notebook 01 are tested in their folders, autograder/graded/.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from course_lib import (
    DataFormatError,
    extract_gsm8k_answer,
    gsm8k_to_r1_zero,
    load_gsm8k,
    load_problems,
    r1_zero_reward_fn,
    read_jsonl,
)

SHARED_GSM8K = Path(__file__).resolve().parents[2] / "shared" / "data" / "gsm8k"


@pytest.mark.parametrize(
    "answer, gold",
    [("1,080", "1080"), ("1080", "1,080"), ("\\boxed{72}", "72"), ("0.5", "1/2"), ("72.0", "72"), ("$18", "18"), (" 18. ", "18"), ("\\frac{3}{4}", "0.75")],
)
def test_reward_grades_equivalent_answers_equal(answer, gold):
    assert r1_zero_reward_fn(f"reasoning </think> <answer> {answer} </answer>", gold) == {
        "format_reward": 1.0, "answer_reward": 1.0, "reward": 1.0,
    }


@pytest.mark.parametrize(
    "response, expected",
    [
        ("reasoning </think> <answer> 71 </answer>", (1.0, 0.0, 0.0)),
        ("reasoning </think><answer> 72 </answer>", (0.0, 0.0, 0.0)),  # no space: format broken
        ("reasoning </think> <answer> 72", (0.0, 0.0, 0.0)),  # never closed
        ("the answer is 72", (0.0, 0.0, 0.0)),
        ("reasoning </think> <answer>  </answer>", (1.0, 0.0, 0.0)),
        ("reasoning </think> <answer> 7 </answer> <answer> 72 </answer>", (1.0, 1.0, 1.0)),  # last block counts
    ],
)
def test_reward_format_and_answer(response, expected):
    r = r1_zero_reward_fn(response, "72")
    assert (r["format_reward"], r["answer_reward"], r["reward"]) == expected


@pytest.mark.skipif(not SHARED_GSM8K.is_dir(), reason="the shared GSM8K copy is not on this machine")
def test_reward_on_every_gsm8k_test_gold_answer():
    examples = load_gsm8k("test", SHARED_GSM8K)
    assert len(examples) == 1319
    failures = []
    for ex in examples:
        r = gsm8k_to_r1_zero(ex)
        gold = extract_gsm8k_answer(ex["answer"])
        stated = ex["answer"].rsplit("####", 1)[1].strip()  # as written, commas included
        for response in (r["output"], f" ... </think> <answer> {stated} </answer>"):
            if r1_zero_reward_fn(response, gold)["reward"] != 1.0:
                failures.append((gold, response[-40:]))
    assert not failures, failures[:5]


def write(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_malformed_jsonl_line_names_file_and_line(tmp_path):
    good = json.dumps({"question": "q", "answer": "a\n#### 1"})
    write(tmp_path / "train.jsonl", [good, good, '{"question": "q", "answer": ', good])
    with pytest.raises(DataFormatError, match=r"train\.jsonl:3: not valid JSON"):
        load_gsm8k("train", tmp_path)


@pytest.mark.parametrize(
    "line, message",
    [('{"question": "q"}', "missing field 'answer'"), ('["q", "a"]', "expected a JSON object"), ('{"question": 1, "answer": "a"}', "field 'question' must be a string")],
)
def test_bad_records_name_file_line_and_field(tmp_path, line, message):
    good = json.dumps({"question": "q", "answer": "a\n#### 1"})
    path = write(tmp_path / "test.jsonl", [good, "", line])
    with pytest.raises(DataFormatError, match=rf"test\.jsonl:3: {message}"):
        read_jsonl(path)


def test_load_gsm8k_local_folder_and_missing_split(tmp_path):
    write(tmp_path / "test.jsonl", [json.dumps({"question": "q", "answer": "a\n#### 1"})])
    assert load_gsm8k("test", tmp_path) == [{"question": "q", "answer": "a\n#### 1"}]
    with pytest.raises(FileNotFoundError, match="no train.jsonl"):
        load_gsm8k("train", tmp_path)
    with pytest.raises(FileNotFoundError, match="no test.jsonl"):
        load_problems(str(tmp_path / "nowhere"), "test")


def test_load_gsm8k_offline_error_names_both_sources(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    with pytest.raises(FileNotFoundError) as err:
        load_gsm8k("test")
    assert "data_dir=" in str(err.value) and "openai/gsm8k" in str(err.value)
