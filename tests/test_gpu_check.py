"""The instructor's GPU path without a GPU: the shipped model shape and the widened tokenizer."""

from __future__ import annotations

import random

import pytest
import torch

from tests.helpers import problems


def test_the_shipped_shape_is_qwen25_math_15b():
    """The values of Qwen2.5-Math-1.5B's published config.json (the source is cited in course_lib.world.stand_in),
    and its parameter count (1.54 B, tied embeddings) from that shape."""
    from transformers import AutoConfig, AutoModelForCausalLM

    from course_lib.world.stand_in import load_shape

    shape = load_shape("qwen2.5-math-1.5b")
    assert {k: shape[k] for k in ("hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
                                  "intermediate_size", "vocab_size", "tie_word_embeddings", "rope_theta",
                                  "max_position_embeddings")} == {
        "hidden_size": 1536, "num_hidden_layers": 28, "num_attention_heads": 12, "num_key_value_heads": 2,
        "intermediate_size": 8960, "vocab_size": 151936, "tie_word_embeddings": True, "rope_theta": 10000,
        "max_position_embeddings": 4096}
    config = AutoConfig.for_model(**{k: v for k, v in shape.items() if k != "architectures"})
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    assert sum(p.numel() for p in model.parameters()) == 1_543_714_304
    with pytest.raises(FileNotFoundError, match="shipped: qwen2.5-math-1.5b"):
        load_shape("qwen9-nope")


def test_the_widened_tokenizer_decodes_every_id_and_keeps_the_course_ids(tok):
    from course_lib.world.tokenizer_build import pad_vocabulary

    wide = pad_vocabulary(tok, 151936, model_max_length=4096)
    assert len(wide) == 151936 and wide.model_max_length == 4096
    tokens = wide.convert_ids_to_tokens(list(range(151936)))
    assert None not in tokens and len(set(tokens)) == 151936  # every id is a token of its own
    # the course's own text: the same ids, format tags and special tokens included
    for record in problems(50):
        text = record["question"] + " <think> " + record["answer"] + " </think> <answer> 4 </answer><|endoftext|>"
        assert wide.encode(text, add_special_tokens=False) == tok.encode(text, add_special_tokens=False)
    # what a random model samples: a run of whole-character tokens decodes and tokenizes back to itself
    rng = random.Random(0)
    chars = [i for i in rng.sample(range(len(tok), 151936), 3000) if "\ufffd" not in wide.decode([i])]
    assert len(chars) > 2900
    assert wide.encode(wide.decode(chars), add_special_tokens=False) == chars
    with pytest.raises(ValueError, match="must exceed"):
        pad_vocabulary(tok, len(tok))
