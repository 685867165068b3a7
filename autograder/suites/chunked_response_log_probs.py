"""Hidden cases of `chunked_response_log_probs(model, input_ids, labels, chunk_size) -> (B, T)`.

Each case's model is a small Hugging Face causal LM built inside `call` from plain inputs (the
architecture's name, a config dict and a state dict), never a pickled module: Gemma 2 with a
final-logit cap of 30, 5, 7.5 or 20, Gemma 2 with the cap None or 0, Qwen2 (whose config has no
such field) with tied and untied output layers. The weights are random, with the final norm
scaled so that raw logits reach about twice the cap (or about 25 where there is no cap): a missing
or extra cap moves the log-probs by whole nats, not by rounding. Outputs: the (B, T) log-probs and
the gradients of the output layer and of the final norm through a weighted sum of them (the
policy log-probs of a trainer need a graph).

The mistakes each have their case: the cap ignored or read under the misspelt key
`final_logits_softcapping` (every `capped_*` case; `misspelt_key_present_caps_nothing`, whose
config carries the misspelt key with a value while the real field is None); the cap applied twice
or as `logits * tanh(logits / c)` (`capped_*`); a cap from a constant instead of the config
(`capped_cap5_*`, `uncapped_*`, `qwen2_*`); `model.config.final_logit_softcapping` read without a
default (`qwen2_*`: Qwen2 has no such attribute); a cap of None or 0 not treated as "no cap"
(`uncapped_cap_None_*`, `uncapped_cap_0_*`); the labels shifted a second time (every case: the
shape); a last partial chunk dropped (`capped_cap30_remainder_*`); the input embeddings used as the
output layer (`*untied*`); a forced float32 result (`float64_*`); no graph (every case: the
gradients). Memory is not graded here: materialising the full logits is not a wrong value.
"""

from __future__ import annotations

import torch

GRADED = "chunked_response_log_probs"
WARM = ('transformers',)  # imported by a judge runner started ahead (autograder.judge)
TRIPWIRE = ["chunked_response_log_probs", "final_logits_softcap"]

ARCHITECTURES = {"gemma2": ("Gemma2Config", "Gemma2ForCausalLM"), "qwen2": ("Qwen2Config", "Qwen2ForCausalLM")}
PAD_ID = 0


def config_dict(arch: str, vocab: int, cap="absent", tied: bool = True, **extra) -> dict:
    """A tiny config (hidden 16): Gemma 2 with two layers (one sliding-window, one global), Qwen2 with one."""
    common = {"vocab_size": vocab, "hidden_size": 16, "intermediate_size": 32, "num_attention_heads": 2,
              "num_key_value_heads": 1, "max_position_embeddings": 64, "tie_word_embeddings": tied,
              "pad_token_id": PAD_ID, "eos_token_id": 1, "bos_token_id": 1, "attn_implementation": "eager"}
    if arch == "gemma2":
        common |= {"num_hidden_layers": 2, "head_dim": 8, "query_pre_attn_scalar": 8, "sliding_window": 4,
                   "attn_logit_softcapping": 50.0}
        if cap != "absent":
            common["final_logit_softcapping"] = cap
    else:
        common |= {"num_hidden_layers": 1}
    return common | extra


def build_model(arch: str, config: dict, state: dict | None = None, dtype=torch.float32):
    """The case's model in eval mode; `state` (a state dict) sets every weight."""
    import transformers

    config_cls, model_cls = (getattr(transformers, n) for n in ARCHITECTURES[arch])
    with torch.random.fork_rng():
        torch.manual_seed(0)  # the random init is overwritten by `state`; fixed so it is harmless
        model = model_cls(config_cls(**config))
    model.to(dtype)
    if state is not None:
        model.load_state_dict(state)
    return model.eval()


def _final_norm_scale(arch: str, model, factor: float) -> None:
    """Multiply the final norm's output by `factor` (Gemma 2's norm multiplies by 1 + w, Qwen2's by w)."""
    w = model.model.norm.weight
    with torch.no_grad():
        w.copy_(factor * (1.0 + w) - 1.0 if arch == "gemma2" else factor * w)


def random_model_state(gen: torch.Generator, arch: str, config: dict, input_ids: torch.Tensor,
                       target: float, dtype=torch.float32) -> dict:
    """Random weights (scaled like a trained model's) whose raw logits on `input_ids` average `target` at their max."""
    model = build_model(arch, config, dtype=torch.float64)
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=gen, dtype=torch.float64)
            if name.endswith("norm.weight") or "layernorm" in name:
                p.copy_(0.1 * noise if arch == "gemma2" else 1.0 + 0.1 * noise)
            elif p.dim() == 1:  # biases
                p.copy_(0.1 * noise)
            elif "embed_tokens" in name:
                p.copy_(noise)
            else:
                p.copy_(noise / p.shape[1] ** 0.5)
        raw = model.get_output_embeddings()(model.model(input_ids).last_hidden_state)  # (B, T, V)
        _final_norm_scale(arch, model, target / float(raw.abs().amax(-1).mean()))
    return {k: v.to(dtype).clone() for k, v in model.state_dict().items()}


def make_inputs(gen: torch.Generator) -> list[tuple[str, dict]]:
    def case(arch, B, T, V, chunk, cap="absent", tied=True, target=None, dtype=torch.float32, pad=None, **extra):
        full = torch.randint(2, V, (B, T + 1), generator=gen)  # ids 0 (pad) and 1 (eos) only where placed
        if pad is not None:  # right padding: row b keeps pad[b] real tokens
            for b, keep in enumerate(pad):
                full[b, keep:] = PAD_ID
        config = config_dict(arch, V, cap, tied, **extra)
        if target is None:
            target = 2.0 * cap if cap not in ("absent", None, 0) else 25.0
        state = random_model_state(gen, arch, config, full[:, :-1], target, dtype)
        return {"arch": arch, "config": config, "state": state, "dtype": dtype, "chunk_size": chunk,
                "input_ids": full[:, :-1].clone(), "labels": full[:, 1:].clone(),
                "weights": torch.randn(B, T, generator=gen, dtype=torch.float64).to(dtype)}

    return [
        ("capped_cap30_remainder_B2_T7_chunk3", case("gemma2", 2, 7, 50, 3, cap=30.0)),
        ("capped_cap5_chunk_of_1_row_B2_T6", case("gemma2", 2, 6, 40, 1, cap=5.0)),
        ("capped_cap30_chunk_larger_than_BT_B3_T5", case("gemma2", 3, 5, 64, 4096, cap=30.0)),
        ("capped_cap20_untied_several_chunks_B2_T17_V300", case("gemma2", 2, 17, 300, 16, cap=20.0, tied=False)),
        ("capped_cap30_padded_labels_B3_T9", case("gemma2", 3, 9, 48, 5, cap=30.0, pad=[10, 6, 3])),
        ("capped_cap30_T1_B4_chunk2", case("gemma2", 4, 1, 32, 2, cap=30.0)),
        ("float64_capped_cap7.5_B2_T6_chunk4", case("gemma2", 2, 6, 40, 4, cap=7.5, dtype=torch.float64)),
        ("uncapped_cap_None_B2_T6", case("gemma2", 2, 6, 40, 5, cap=None)),
        ("uncapped_cap_0_B2_T6", case("gemma2", 2, 6, 40, 3, cap=0.0)),
        ("misspelt_key_present_caps_nothing_B2_T6", case("gemma2", 2, 6, 40, 4, cap=None, target=25.0,
                                                         final_logits_softcapping=3.0)),
        ("qwen2_no_softcap_field_B2_T7", case("qwen2", 2, 7, 50, 3)),
        ("qwen2_untied_no_softcap_field_B2_T5", case("qwen2", 2, 5, 60, 4, tied=False)),
    ]


def call(fn, inputs: dict) -> dict:
    model = build_model(inputs["arch"], inputs["config"], inputs["state"], inputs["dtype"])
    log_probs = fn(model, inputs["input_ids"].clone(), inputs["labels"].clone(), chunk_size=inputs["chunk_size"])
    (log_probs * inputs["weights"].to(log_probs.dtype)).sum().backward()
    head = model.get_output_embeddings().weight
    return {"log_probs": log_probs, "grad_output_layer": head.grad, "grad_final_norm": model.model.norm.weight.grad}
