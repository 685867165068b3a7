"""A run killed with SIGKILL mid-way resumes from its last checkpoint and ends as if never stopped."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from tests.helpers import REPO, save_random_model

ARGS = {
    "sft": ["steps=8", "batch_size=4", "gradient_accumulation_steps=2", "lr=1e-2", "warmup_steps=2",
            "n_examples=24"],
    "grpo": ["n_grpo_steps=8", "rollout_batch_size=8", "group_size=4", "train_batch_size=8",
             "gradient_accumulation_steps=2", "sampling_max_tokens=10", "sampling_min_tokens=1", "lr=1e-2",
             "loss_type=grpo_clip"],
}
# PPO from the tiny SFT model, whose answers earn rewards: a random model's are all 0, and then the
# critic (V = 0 already right) never moves and its resume would go untested
ARGS["ppo"] = [a for a in ARGS["grpo"] if not a.startswith(("loss_type", "lr"))] + [
    "model=qwen2-sft", "sampling_max_tokens=100", "lr=1e-3", "critic_lr=1e-2", "lam=0.9"]
# DPO from the tiny SFT model too, on its own samples (a random model's are never correct: no pair); the
# resumed run must train on the checkpoint's pairs and reference log-probs, not rebuild them
ARGS["dpo"] = ["model=qwen2-sft", "pair_source=on_policy", "n_questions=16", "group_size=8", "max_pairs_per_group=2",
               "sampling_max_tokens=100", "steps=8", "batch_size=4", "gradient_accumulation_steps=2", "lr=1e-4"]
NOISY = {"step_time", "rollout_time"}


def command(kind: str, model: Path, out: Path, resume: bool = False) -> list[str]:
    cmd = [sys.executable, "-m", "course_lib.training", kind, "--no-progress", f"model={model}", f"output_dir={out}",
           "eval_examples=0", "checkpoint_every=2", "keep_checkpoints=10", *ARGS[kind]]
    return cmd + (["--resume"] if resume else [])


def env() -> dict:
    return {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}


def train_records(out: Path) -> list[dict]:
    recs = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines() if line.strip()]
    return [{k: v for k, v in r.items() if k not in NOISY} for r in recs if r["kind"] == "train"]


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["sft", "grpo", "ppo", "dpo"])
def test_sigkill_then_resume_matches_uninterrupted(kind, tmp_path):
    model = save_random_model(tmp_path / "model")
    full, killed = tmp_path / "full", tmp_path / "killed"
    subprocess.run(command(kind, model, full), env=env(), check=True, capture_output=True, timeout=600)

    proc = subprocess.Popen(command(kind, model, killed), env=env(), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, start_new_session=True)
    latest = killed / "checkpoints" / "latest"
    deadline = time.time() + 300
    while not latest.exists() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    assert proc.poll() is None, f"the run ended before it could be killed: {proc.stderr.read().decode()[-2000:]}"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    killed_at = int(latest.read_text().split("_")[1])
    assert 2 <= killed_at < 8
    assert not (killed / "model").exists(), "the killed run must not have finished"

    res = subprocess.run(command(kind, model, killed, resume=True), env=env(), capture_output=True, text=True,
                         timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]

    a, b = train_records(full), train_records(killed)
    assert [r["step"] for r in b] == list(range(1, 9)), "resumed metrics must hold each step once"
    for ra, rb in zip(a, b):
        for key, va in ra.items():
            if isinstance(va, float):
                assert rb[key] == pytest.approx(va, rel=1e-5, abs=1e-6), (ra["step"], key)
            else:
                assert rb[key] == va, (ra["step"], key)
    wa, wb = load_file(full / "model" / "model.safetensors"), load_file(killed / "model" / "model.safetensors")
    for name in wa:
        assert torch.allclose(wa[name], wb[name], atol=1e-6), name
    if kind == "ppo":  # the critic resumed too: its values after the resume are logged, and they matched above
        assert any(r["value_mean"] != 0 for r in b[2:]), "the critic never moved"
    if kind == "dpo":  # the pairs and reference log-probs came back from the checkpoint, the same as the full run's
        sa = torch.load(full / "checkpoints" / "step_000008" / "trainer_state.pt", weights_only=False)["extra"]
        sb = torch.load(killed / "checkpoints" / "step_000008" / "trainer_state.pt", weights_only=False)["extra"]
        assert sa["extra_state"]["pairs"] == sb["extra_state"]["pairs"]
        assert torch.equal(sa["extra_state"]["ref_log_probs"], sb["extra_state"]["ref_log_probs"])
