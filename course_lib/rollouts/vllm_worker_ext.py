"""What a vLLM server runs inside its worker for the course: a weight reload its HTTP API can call.

Started with `--worker-extension-cls course_lib.rollouts.vllm_worker_ext.CourseWorkerExtension`
(and `VLLM_SERVER_DEV_MODE=1`, which opens `/collective_rpc`), the server's worker gains
`reload_weights_from(path)`: vLLM's own in-place reload from a folder of safetensors files, then
the tied output layer pointed at the new embeddings (vLLM's reload leaves it on the old ones:
`vllm_engine._retie_lm_head`). This is the nearest real path the CPU build has to a trainer's
weight sync: the GPU builds' NCCL and IPC transfer engines need devices the CPU build lacks.
"""

from __future__ import annotations


class CourseWorkerExtension:
    """Mixed into vLLM's worker class by the server (`self` is the worker)."""

    def reload_weights_from(self, path: str) -> bool:
        """Load the checkpoint-format weights under `path` in place; True when a tied output layer was re-tied."""
        from .vllm_engine import _retie_lm_head

        self.model_runner.reload_weights(weights_path=path, is_checkpoint_format=True)
        return _retie_lm_head(self.model_runner.get_model())
