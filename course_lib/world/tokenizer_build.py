"""The course's own tokenizer: byte-level BPE trained with the `tokenizers` library.

Choices, each one the same as in the real tokenizers the course later swaps in (Qwen2.5):
- byte-level BPE after a Qwen2-style split regex, so every string round-trips exactly and each
  digit is its own token (numbers are read digit by digit);
- `<think>`, `</think>`, `<answer>`, `</answer>` are *ordinary* added tokens (one id each, never
  split), not special tokens, so `decode(ids, skip_special_tokens=True)` keeps them and the
  reward function can still see the format;
- special tokens: `<|endoftext|>` (eos), `<|pad|>` (pad), `<|im_start|>`, `<|im_end|>` (chat turns);
- no BOS and nothing added by `tokenizer(text)`: prompt and output tokenized separately and then
  concatenated give the same ids as the course's `tokenize_prompt_and_output` expects;
- a chat template whose generation prompt takes an `open_thinking` switch, like chat models with
  thinking modes: open (default) ends with `<think>\\n`; closed ends with an empty
  `<think>\\n\\n</think>\\n\\n` block.

`pad_vocabulary` widens a tokenizer to a real model's vocabulary size (151,936 for Qwen2.5) with one
token per non-ASCII character, so that a randomly initialised model of the real shape samples only
ids that decode (`course_lib.world.stand_in`).

The training corpus holds the r1_zero prompt, the arithmetic problems in both forms and bare
equations, so the prompt's boilerplate words are single tokens and sequences stay short.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

EOS_TOKEN = "<|endoftext|>"
PAD_TOKEN = "<|pad|>"
IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
SPECIAL_TOKENS = [PAD_TOKEN, EOS_TOKEN, IM_START, IM_END]
FORMAT_TAGS = ["<think>", "</think>", "<answer>", "</answer>"]
VOCAB_SIZE = 1024  # BPE vocabulary + special tokens + format tags

# The split regex of Qwen2's tokenizer: letters in words, digits one by one, punctuation runs,
# newlines and spaces kept apart.
SPLIT_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)

CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}"
    "{{ '<|im_start|>assistant\\n' }}"
    "{%- if open_thinking is defined and open_thinking is false -%}"
    "{{ '<think>\\n\\n</think>\\n\\n' }}"
    "{%- else -%}"
    "{{ '<think>\\n' }}"
    "{%- endif -%}"
    "{%- endif -%}"
)

# A chat template in the style of Qwen3's (its published template, without tools, function calls
# and the `reasoning_content` field), with the opposite default of the course's: the switch is
# `enable_thinking`; by default (undefined or true) the generation prompt is `<|im_start|>assistant\n`
# alone and the model writes its own `<think>`; `enable_thinking=false` ends the prompt with an
# empty `<think>\n\n</think>\n\n` block. As in Qwen3's, an assistant turn before the last user
# message loses its reasoning: of a content holding `</think>`, the text after its last `</think>`,
# leading newlines removed, is rendered. One simplification: an assistant turn after the last user
# message is rendered as it is (Qwen3's rebuilds it as `<think>\n` + reasoning + `\n</think>\n\n` +
# answer, adding an empty block to a reply without one), so a conversation rendered whole is its
# prompt with the generation prompt, then the rest of the reply and `<|im_end|>\n`. Not the course
# tokenizer's template (`data/tokenizer/` keeps CHAT_TEMPLATE): `with_chat_template` sets it on a copy.
QWEN3_STYLE_TEMPLATE = (
    "{%- if messages[0]['role'] == 'system' -%}"
    "{{ '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}"
    "{%- endif -%}"
    "{%- set ns = namespace(last_query_index=messages|length - 1) -%}"
    "{%- for message in messages -%}"
    "{%- if message['role'] == 'user' -%}{%- set ns.last_query_index = loop.index0 -%}{%- endif -%}"
    "{%- endfor -%}"
    "{%- for message in messages -%}"
    "{%- if message['role'] == 'user' or (message['role'] == 'system' and not loop.first) -%}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{%- elif message['role'] == 'assistant' -%}"
    "{%- set content = message['content'] -%}"
    "{%- if loop.index0 < ns.last_query_index and '</think>' in content -%}"
    "{%- set content = content.split('</think>')[-1].lstrip('\\n') -%}"
    "{%- endif -%}"
    "{{ '<|im_start|>assistant\\n' + content + '<|im_end|>\\n' }}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}"
    "{{ '<|im_start|>assistant\\n' }}"
    "{%- if enable_thinking is defined and enable_thinking is false -%}"
    "{{ '<think>\\n\\n</think>\\n\\n' }}"
    "{%- endif -%}"
    "{%- endif -%}"
)


def with_chat_template(tokenizer, template: str):
    """A copy of `tokenizer` whose chat template is `template` (e.g. QWEN3_STYLE_TEMPLATE), so that
    `apply_chat_template` runs that Jinja; `tokenizer` itself is left as it is."""
    import copy

    out = copy.deepcopy(tokenizer)
    out.chat_template = template
    return out


def training_corpus(seed: int = 0, n_problems: int = 6000, n_facts: int = 4000) -> list[str]:
    """Texts the BPE is trained on: r1_zero prompts and outputs, plain Q/A text, equations, chats."""
    from .arith_data import arithmetic_fact, generate_problem, plain_qa_text
    from ..gsm8k import gsm8k_to_r1_zero

    rng = random.Random(seed + 7919)
    texts = []
    for i in range(n_problems):
        p = generate_problem(rng)
        r1 = gsm8k_to_r1_zero(p)
        texts.append(r1["prompt"] + r1["output"])
        texts.append(plain_qa_text(p))
        if i % 10 == 0:
            texts.append(f"{IM_START}user\n{p['question']}{IM_END}\n{IM_START}assistant\n<think>\n")
    texts += [arithmetic_fact(rng) for _ in range(n_facts)]
    return texts


def build_tokenizer(seed: int = 0, vocab_size: int = VOCAB_SIZE):
    """Train the tokenizer and wrap it as a `PreTrainedTokenizerFast` with the chat template."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token=None, byte_fallback=False))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(SPLIT_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size - len(FORMAT_TAGS),
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(training_corpus(seed), trainer=trainer)
    tok.add_tokens([AddedToken(t, normalized=False, special=False) for t in FORMAT_TAGS])

    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token=EOS_TOKEN,
        pad_token=PAD_TOKEN,
        additional_special_tokens=[IM_START, IM_END],
        clean_up_tokenization_spaces=False,
        model_max_length=512,
        padding_side="right",
    )
    fast.chat_template = CHAT_TEMPLATE
    return fast


def save_tokenizer(out_dir: str | os.PathLike, seed: int = 0):
    out_dir = Path(out_dir)
    tok = build_tokenizer(seed)
    out_dir.mkdir(parents=True, exist_ok=True)
    tok.save_pretrained(out_dir)
    return tok


def byte_level_alphabet() -> dict[int, str]:
    """The byte-level BPE's character for each byte (GPT-2's table, which `tokenizers`' ByteLevel uses):
    printable Latin-1 bytes stand for themselves, the others for the characters from U+0100 on."""
    kept = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    table, extra = {}, 0
    for b in range(256):
        if b in kept:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


def filler_characters():
    """Non-ASCII characters in code point order from U+00A1: no whitespace, control or surrogate code point, so
    each is one pre-token piece that UTF-8 encodes and decodes exactly (private-use and unassigned ones included)."""
    import unicodedata

    for cp in range(0xA1, 0x110000):
        ch = chr(cp)
        if 0xD800 <= cp <= 0xDFFF or ch.isspace() or unicodedata.category(ch) == "Cc":
            continue
        yield ch


def pad_vocabulary(tokenizer, vocab_size: int, model_max_length: int | None = None):
    """A copy of the byte-level BPE `tokenizer` whose vocabulary is filled up to `vocab_size` ids (and whose
    `model_max_length` is the given one, when given: the model's context, not the tiny world's 512).

    Qwen2.5's embedding table (151,936 rows) is wider than its tokenizer, and a random model of that shape samples
    any of its ids. The ids added here are BPE tokens of whole non-ASCII characters (U+00A1 on, in order), each with
    the merges that build it from its UTF-8 bytes (and the partial-character tokens those merges need, which decode
    to U+FFFD as a lone byte token does): every id decodes, a sampled character re-tokenizes to its own id, and the
    tokenizer's own text (ASCII) tokenizes exactly as before, since no added merge touches an ASCII byte.
    Raises ValueError when `tokenizer` already has `vocab_size` ids or more.
    """
    import json

    from tokenizers import Tokenizer
    from transformers import PreTrainedTokenizerFast

    if len(tokenizer) >= vocab_size:
        raise ValueError(f"vocab_size {vocab_size} must exceed the tokenizer's {len(tokenizer)} ids")
    state = json.loads(tokenizer.backend_tokenizer.to_str())
    vocab, merges = state["model"]["vocab"], state["model"]["merges"]
    # the added tokens (format tags) join the model's vocabulary at their own ids, so that its ids stay
    # contiguous: `tokenizers` gives an added token outside it the next free id on loading, not its own
    vocab.update({t["content"]: t["id"] for t in state["added_tokens"]})
    byte_char, next_id = byte_level_alphabet(), len(tokenizer)
    for ch in filler_characters():
        pieces = [byte_char[b] for b in ch.encode("utf-8")]
        token = pieces[0]
        for piece in pieces[1:]:  # the merges that build the character from its bytes, left to right
            if next_id == vocab_size:
                break
            if token + piece not in vocab:
                merges.append([token, piece])
                vocab[token + piece] = next_id
                next_id += 1
            token += piece
        if next_id == vocab_size:
            break
    fast = PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer.from_str(json.dumps(state)), eos_token=tokenizer.eos_token,
        pad_token=tokenizer.pad_token, additional_special_tokens=[IM_START, IM_END], clean_up_tokenization_spaces=False,
        model_max_length=model_max_length or tokenizer.model_max_length, padding_side=tokenizer.padding_side)
    fast.chat_template = tokenizer.chat_template
    return fast
