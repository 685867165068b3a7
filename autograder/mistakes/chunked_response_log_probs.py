"""The known mistakes of `chunked_response_log_probs` (notebook 08): the catalogue `autograder.mistakes` describes."""

from __future__ import annotations

from autograder.mistakes import Mistake, edited


# a notebook-08 student's own cap, pasted above each chunked path
SOFTCAP = """
    import torch
    def final_logits_softcap(logits, cap):
        if not cap:
            return logits
        return cap * torch.tanh(logits / cap)
"""

CAPPED = ["capped_cap30_remainder_B2_T7_chunk3", "capped_cap5_chunk_of_1_row_B2_T6"]

# the correct version 'flatten_and_gather' (tests/graded/test_chunked_response_log_probs.py), which edits start from
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
