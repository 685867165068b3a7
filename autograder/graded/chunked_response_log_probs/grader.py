"""The grader's side of `chunked_response_log_probs` (notebook 08): how its hidden cases are drawn, the
correct versions that must earn full marks and the known mistakes that must lose them, each with the
sentence a student reads (`autograder.mistakes`). Never in a student kit or the grading sandbox,
which hold the folder's __init__.py only.

Hidden cases of `chunked_response_log_probs(model, input_ids, labels, chunk_size) -> (B, T)`.

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

The suite's tripwire forbids calling course_lib's `final_logits_softcap`: each version carries the
student's own, as notebook 08 has it in the cell above.
"""

from __future__ import annotations

import torch

from autograder.graded.chunked_response_log_probs import build_model
from autograder.mistakes import edited, Mistake


# ---------------------------------------------------------------- the hidden cases
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


# ---------------------------------------------------------------- the correct versions
# a notebook-08 student's own cap, pasted above each chunked path
SOFTCAP = """
    import torch
    def final_logits_softcap(logits, cap):
        if not cap:
            return logits
        return cap * torch.tanh(logits / cap)
"""

CAPPED = ["capped_cap30_remainder_B2_T7_chunk3", "capped_cap5_chunk_of_1_row_B2_T6"]

# the correct version 'flatten_and_gather' (autograder/graded/chunked_response_log_probs/test_chunked_response_log_probs.py), which edits start from
FLATTEN_AND_GATHER = SOFTCAP + """
    def chunked_response_log_probs(model, input_ids, labels, chunk_size=1024):
        hidden = model.get_decoder()(input_ids=input_ids).last_hidden_state
        head = model.get_output_embeddings()
        cap = getattr(model.config, "final_logit_softcapping", None)
        flat_hidden, flat_labels = hidden.reshape(-1, hidden.shape[-1]), labels.reshape(-1)
        pieces = []
        for start in range(0, flat_hidden.shape[0], chunk_size):
            logits = final_logits_softcap(head(flat_hidden[start:start + chunk_size]), cap)
            logits = logits.to(torch.promote_types(logits.dtype, torch.float32))
            log_p = torch.log_softmax(logits, dim=-1)
            pieces.append(log_p.gather(-1, flat_labels[start:start + chunk_size, None]).squeeze(-1))
        return torch.cat(pieces).view(labels.shape)
    """

# the path of "flatten_and_gather" with each chunk's rows named once (the same computation), and one
# realistic edit each of it
CHUNKED_PATH = edited(FLATTEN_AND_GATHER, (
    "            logits = final_logits_softcap(head(flat_hidden[start:start + chunk_size]), cap)\n",
    "            rows = slice(start, start + chunk_size)\n"
    "            logits = final_logits_softcap(head(flat_hidden[rows]), cap)\n"), (
    "flat_labels[start:start + chunk_size, None]", "flat_labels[rows, None]"))

CAPPED_LOGITS = "logits = final_logits_softcap(head(flat_hidden[rows]), cap)"

CAP_READ = 'cap = getattr(model.config, "final_logit_softcapping", None)'


CORRECT = {
    "flatten_and_gather": FLATTEN_AND_GATHER,
    # log p(y) = z_y - logsumexp(z), the two pieces of log_softmax taken separately
    "label_logit_minus_logsumexp": SOFTCAP + """
    def chunked_response_log_probs(model, input_ids, labels, chunk_size=1024):
        out = model.get_decoder()(input_ids=input_ids)
        h = out.last_hidden_state.flatten(0, 1)
        y = labels.flatten()
        cap = model.config.to_dict().get("final_logit_softcapping")
        result = []
        for i in range(0, len(y), chunk_size):
            z = final_logits_softcap(model.get_output_embeddings()(h[i:i + chunk_size]), cap)
            if z.dtype not in (torch.float32, torch.float64):
                z = z.float()
            picked = z.gather(1, y[i:i + chunk_size].unsqueeze(1)).squeeze(1)
            result.append(picked - torch.logsumexp(z, dim=1))
        return torch.cat(result).reshape(labels.shape)
    """,
    # cross-entropy is -log p of the label: no reduction, the sign flipped back
    "cross_entropy_on_split_chunks": SOFTCAP + """
    import torch.nn.functional as F
    def chunked_response_log_probs(model, input_ids, labels, chunk_size=1024):
        hidden = model.get_decoder()(input_ids=input_ids).last_hidden_state
        B, T, H = hidden.shape
        cap = getattr(model.config, "final_logit_softcapping", None) or None
        lm_head = model.get_output_embeddings()
        pieces = [
            -F.cross_entropy(final_logits_softcap(lm_head(h), cap).to(torch.promote_types(h.dtype, torch.float32)),
                             y, reduction="none")
            for h, y in zip(torch.split(hidden.reshape(B * T, H), chunk_size), torch.split(labels.reshape(B * T), chunk_size))
        ]
        return torch.cat(pieces).reshape(B, T)
    """,
    # the output layer's weight applied by hand, in float64, the result cast back
    "float64_matmul": SOFTCAP + """
    def chunked_response_log_probs(model, input_ids, labels, chunk_size=1024):
        hidden = model.get_decoder()(input_ids=input_ids).last_hidden_state
        weight = model.get_output_embeddings().weight  # (V, H): Gemma 2's and Qwen2's heads have no bias
        cap = getattr(model.config, "final_logit_softcapping", None)
        out_dtype = torch.promote_types(hidden.dtype, torch.float32)
        flat = hidden.reshape(-1, hidden.shape[-1]).double()
        ids = labels.reshape(-1)
        parts = []
        for s in range(0, flat.shape[0], chunk_size):
            logits = final_logits_softcap(flat[s:s + chunk_size] @ weight.double().T, cap)
            parts.append(torch.log_softmax(logits, -1)[torch.arange(len(ids[s:s + chunk_size])), ids[s:s + chunk_size]])
        return torch.cat(parts).reshape(labels.shape).to(out_dtype)
    """,
    # chunks of positions within each sequence (never more than chunk_size rows of logits at once)
    "chunks_within_each_sequence": SOFTCAP + """
    def chunked_response_log_probs(model, input_ids, labels, chunk_size=1024):
        hidden = model.get_decoder()(input_ids=input_ids).last_hidden_state
        head = model.get_output_embeddings()
        cap = getattr(model.config, "final_logit_softcapping", 0)
        rows = []
        for b in range(hidden.shape[0]):
            row = []
            for t in range(0, hidden.shape[1], chunk_size):
                logits = final_logits_softcap(head(hidden[b, t:t + chunk_size]), cap)
                logp = torch.log_softmax(logits.to(torch.promote_types(logits.dtype, torch.float32)), dim=-1)
                row.append(logp.gather(-1, labels[b, t:t + chunk_size, None])[:, 0])
            rows.append(torch.cat(row))
        return torch.stack(rows)
    """,
}

# the fresh draws of the cases the many-draws check holds every version to (tests/test_graded.py; 40 by default)
DRAWS = 4


# ---------------------------------------------------------------- the known mistakes
MISTAKES = {
    # the path starts after the forward, so the cap is its job: without it every log-prob is the raw model's
    "chunked_cap_ignored": Mistake(
        "never applies the softcap in the chunked path, so every log-prob is the uncapped model's",
        edited(CHUNKED_PATH, (CAPPED_LOGITS, "logits = head(flat_hidden[rows])")),
        CAPPED),
    # final_logitS_softcapping: an unknown attribute of the config, silently None
    "chunked_misspelt_key": Mistake(
        "reads final_logits_softcapping (misspelt), an unknown config attribute that is silently None, so nothing is capped",
        edited(CHUNKED_PATH, (
            CAP_READ, 'cap = getattr(model.config, "final_logits_softcapping", None)')),
        ["capped_cap30_padded_labels_B3_T9", "misspelt_key_present_caps_nothing_B2_T6"]),
    # Gemma 2's released 30, not this model's cap (nor None, nor Qwen2's absence of one)
    "chunked_cap_from_a_constant": Mistake(
        "uses a constant cap of 30 instead of reading the model's final_logit_softcapping (which may be another value or None)",
        edited(CHUNKED_PATH, (CAP_READ, "cap = 30.0")),
        ["capped_cap5_chunk_of_1_row_B2_T6", "uncapped_cap_None_B2_T6", "qwen2_no_softcap_field_B2_T7"]),
    # Qwen2's config has no such attribute: AttributeError
    "chunked_cap_read_without_a_default": Mistake(
        "reads config.final_logit_softcapping without a default: a config without the field (Qwen2) raises AttributeError",
        edited(CHUNKED_PATH, (
            CAP_READ, "cap = model.config.final_logit_softcapping")),
        ["qwen2_no_softcap_field_B2_T7", "qwen2_untied_no_softcap_field_B2_T5"]),
    # the forward's logits are capped already: a second cap on top of them
    "chunked_cap_applied_twice_over_the_models_logits": Mistake(
        "caps the forward's logits, which the model has capped already: the cap is applied twice",
        edited(CHUNKED_PATH, (
            "hidden = model.get_decoder()(input_ids=input_ids).last_hidden_state\n"
            "        head = model.get_output_embeddings()\n",
            "hidden = model(input_ids).logits  # (B, T, V), capped by the forward\n"
            "        head = torch.nn.Identity()\n")),
        CAPPED),
    # the cap inlined without the None check: None in a division
    "chunked_inline_cap_divides_by_None": Mistake(
        "writes cap * tanh(z / cap) without a None check: a model without a cap divides by None",
        edited(CHUNKED_PATH, (
            CAPPED_LOGITS, "logits = cap * torch.tanh(head(flat_hidden[rows]) / cap)")),
        ["uncapped_cap_None_B2_T6", "qwen2_no_softcap_field_B2_T7"]),
    # the cap inlined with a None check only: a cap of 0 divides by zero
    "chunked_inline_cap_divides_by_zero": Mistake(
        "checks the cap for None only: a cap of 0, which means no cap, divides by zero",
        edited(CHUNKED_PATH, (
            CAPPED_LOGITS,
            "logits = head(flat_hidden[rows]) if cap is None else cap * torch.tanh(head(flat_hidden[rows]) / cap)")),
        ["uncapped_cap_0_B2_T6"]),
    # the labels are shifted already (notebook 01): a second shift drops a position and misaligns the rest
    "chunked_labels_shifted_again": Mistake(
        "shifts hidden states and labels again, though the labels are shifted already: positions are misaligned",
        edited(CHUNKED_PATH, (
            "last_hidden_state\n",
            "last_hidden_state\n        hidden, labels = hidden[:, :-1], labels[:, 1:]  # next-token alignment (again)\n")),
        ["capped_cap30_remainder_B2_T7_chunk3", "qwen2_no_softcap_field_B2_T7"],
        # it raises on every case that asks for no error (a shape error):
        # an exception's class alone is no evidence of this mistake, so recognition cannot name it
        recognisable=False),
    # range(0, N - chunk + 1, chunk): the last, partial chunk never scored
    "chunked_last_partial_chunk_dropped": Mistake(
        "loops up to the last full chunk, so the last, partial chunk is never scored",
        edited(CHUNKED_PATH, (
            "range(0, flat_hidden.shape[0], chunk_size)", "range(0, flat_hidden.shape[0] - chunk_size + 1, chunk_size)")),
        ["capped_cap30_remainder_B2_T7_chunk3", "capped_cap30_chunk_larger_than_BT_B3_T5"]),
    # "tied, isn't it?": the input embeddings are the output layer only when the model ties them
    "chunked_input_embeddings_as_output_layer": Mistake(
        "uses the input embeddings as the output layer, which holds only when the model ties them",
        edited(CHUNKED_PATH, (
            "head = model.get_output_embeddings()",
            "head = lambda h: h @ model.get_input_embeddings().weight.T  # tied, isn't it?")),
        ["capped_cap20_untied_several_chunks_B2_T17_V300", "qwen2_untied_no_softcap_field_B2_T5"]),
    # float32 always: a float64 model's log-probs stay float64
    "chunked_always_float32": Mistake(
        "casts the logits to float32 always: a float64 model's log-probs must stay float64",
        edited(CHUNKED_PATH, (
            "logits = logits.to(torch.promote_types(logits.dtype, torch.float32))", "logits = logits.float()")),
        ["float64_capped_cap7.5_B2_T6_chunk4"]),
    # "scoring only, isn't it?": no graph, and a trainer's policy log-probs need one
    "chunked_without_a_graph": Mistake(
        "scores under torch.no_grad(), so the log-probs have no graph for the trainer's backward",
        edited(CHUNKED_PATH, (
            "        hidden = model.get_decoder()(input_ids=input_ids).last_hidden_state\n",
            "        with torch.no_grad():  # scoring only, isn't it?\n"
            "            hidden = model.get_decoder()(input_ids=input_ids).last_hidden_state\n")),
        ["capped_cap30_remainder_B2_T7_chunk3", "qwen2_no_softcap_field_B2_T7"]),
    # the cap put on the log-probs instead of the logits: a log-prob of -40 becomes -cap * tanh(40 / cap)
    "chunked_cap_on_the_log_probs": Mistake(
        "applies the cap to the log-probs instead of to the logits",
        edited(CHUNKED_PATH, (
            CAPPED_LOGITS, "logits = head(flat_hidden[rows])"), (
            "log_p = torch.log_softmax(logits, dim=-1)",
            "log_p = final_logits_softcap(torch.log_softmax(logits, dim=-1), cap)")),
        CAPPED),
}
