"""The embedded tiny world: everything the course needs to run offline on a laptop CPU.

- `arith_data`: a seeded generator of GSM8K-style arithmetic word problems (`data/arith/`);
- `tokenizer_build`: the course's own byte-level BPE tokenizer (`data/tokenizer/`);
- `tiny_models`: the committed tiny models (`data/tiny/`: a ~1M-parameter Qwen2 base model and a
  tiny Gemma 2 with `final_logit_softcapping`) and `load_tiny`, the one function that loads them.

`scripts/make_world.py` rebuilds all three from scratch.
"""
