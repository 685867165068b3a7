"""Peak extra memory of per-token log-probs: naive log_softmax-then-gather vs the reference.

Each method runs in a fresh process. The logits (B, T, V) float32 are made and touched first;
then the process's resident-set high-water mark is reset (/proc/self/clear_refs) and the method
runs. "extra" = high-water mark - resident size before the method, i.e. what the method adds
on top of the logits (with a fixed glibc mmap threshold, so that freed blocks leave the resident
size and are not counted as held). Three phases are reported:
  forward     peak while computing the (B, T) log-probs (requires_grad logits, as in training)
  retained    what stays allocated after forward, held by autograd for backward
  backward    peak during backward, which must at least hold d logits, one (B, T, V) tensor

Usage: python benchmarks/logprob_memory.py [B T V]     (default 4 256 32000)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

METHODS = ("naive_log_softmax_gather", "reference_log_probs_from_logits")

CHILD = r"""
import json, sys, torch
from course_lib import log_probs_from_logits
torch.set_num_threads(1)
B, T, V, method = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]

def rss():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS"):
            return int(line.split()[1]) * 1024
def hwm():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM"):
            return int(line.split()[1]) * 1024
def reset_peak():
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")

g = torch.Generator().manual_seed(0)
logits = torch.randn(B, T, V, generator=g).requires_grad_()
labels = torch.randint(0, V, (B, T), generator=g)
weights = torch.randn(B, T, generator=g)
fn = {
    "naive_log_softmax_gather": lambda x, y: torch.log_softmax(x, -1).gather(-1, y[..., None]).squeeze(-1),
    "reference_log_probs_from_logits": lambda x, y: log_probs_from_logits(x, y),
}[method]
fn(logits[:1, :2].detach(), labels[:1, :2])  # warm up kernels outside the measurement

base = rss(); reset_peak()
out = fn(logits, labels)
forward_peak = hwm() - base
retained = rss() - base
loss = (out * weights).sum()
reset_peak()
loss.backward()
backward_peak = hwm() - base
print(json.dumps({"forward_peak": forward_peak, "retained": retained, "backward_peak": backward_peak,
                  "logits_bytes": logits.numel() * logits.element_size()}))
"""


def measure(method: str, shape: tuple[int, int, int]) -> dict:
    # A fixed mmap threshold: every block of 128 KiB or more is its own mapping, given back to the
    # system when freed. By default glibc raises the threshold after the first large free and then
    # keeps freed blocks in its heap, where the resident size still counts them: the reference's
    # "retained" then read anything from 16 to 485 MiB from one run to the next.
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "131072"}
    out = subprocess.run([sys.executable, "-c", CHILD, *map(str, shape), method], capture_output=True, text=True,
                         check=True, env=env)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    shape = tuple(int(a) for a in sys.argv[1:4]) or (4, 256, 32000)
    mib = 2**20
    rows = {m: measure(m, shape) for m in METHODS}
    logits_mib = next(iter(rows.values()))["logits_bytes"] / mib
    print(f"logits {shape} float32 = {logits_mib:.0f} MiB; extra memory on top of them (MiB):")
    print(f"{'method':36s} {'forward peak':>13s} {'retained':>9s} {'backward peak':>14s}")
    for m, r in rows.items():
        print(f"{m:36s} {r['forward_peak'] / mib:13.1f} {r['retained'] / mib:9.1f} {r['backward_peak'] / mib:14.1f}")
    print(json.dumps({"shape": shape, "MiB": {m: {k: round(v / mib, 1) for k, v in r.items()} for m, r in rows.items()}}))


if __name__ == "__main__":
    main()
