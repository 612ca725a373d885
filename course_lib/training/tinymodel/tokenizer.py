"""The tiny model's tokenizer: a byte-level BPE with Qwen2's pre-tokenizer, ChatML and FIM tokens.

:func:`train_tokenizer` trains it (``tokenizers``, 4,096 tokens, Qwen2's pre-tokenizer regex, every
:data:`SPECIAL_TOKENS`: ``<|endoftext|>``, the ChatML markers and both styles of FIM sentinels);
:func:`to_transformers_tokenizer` wraps it for transformers with the course's :data:`CHAT_TEMPLATE`.

Introduced in lesson 04.
"""
from __future__ import annotations

from typing import Sequence

EOT = "<|endoftext|>"
IM_START, IM_END = "<|im_start|>", "<|im_end|>"
QWEN_FIM = ["<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>", "<|repo_name|>",
            "<|file_sep|>"]
STARCODER_FIM = ["<fim_prefix>", "<fim_middle>", "<fim_suffix>", "<fim_pad>"]
SPECIAL_TOKENS = [EOT, IM_START, IM_END, *QWEN_FIM, *STARCODER_FIM]

# Qwen2's pre-tokenizer regex: digits one by one, words with a leading space/punctuation, runs of
# whitespace kept apart from the next word (so indentation becomes its own tokens).
QWEN2_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
               r"|\s*[\r\n]+|\s+(?!\S)|\s+")

# ChatML without a default system prompt (like Qwen3's template; Qwen2.5's inserts "You are Qwen, ...").
# The system turn appears only when a conversation has one. The tiny model is not Qwen, and the prompt
# would be 37 of its tokens, a fifth to a quarter of every drill SFT sample (docs/drill.md, "SFT settings"). LLaMA-Factory
# is told the same (`default_system: ""`, course_lib.training.sft.template_default_system), so a
# conversation renders identically at SFT time and at inference time.
CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)


def train_tokenizer(texts: Sequence[str], vocab_size: int = 4096):
    """Train a byte-level BPE tokenizer (the ``tokenizers`` library) with the course's special
    tokens; returns a ``tokenizers.Tokenizer``. Introduced in lesson 04."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE(unk_token=None, fuse_unk=False, byte_fallback=False))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_SPLIT), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2, special_tokens=SPECIAL_TOKENS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(texts, trainer=trainer, length=len(texts))
    return tok


def to_transformers_tokenizer(tok, model_max_length: int = 2048):
    """Wrap a trained ``tokenizers.Tokenizer`` as a transformers fast tokenizer with Qwen-style
    special tokens and the ChatML chat template. Introduced in lesson 04."""
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=EOT, eos_token=IM_END, pad_token=EOT, unk_token=None,
        additional_special_tokens=[IM_START, *QWEN_FIM, *STARCODER_FIM],
        model_input_names=["input_ids", "attention_mask"],
        chat_template=CHAT_TEMPLATE, model_max_length=model_max_length,
        clean_up_tokenization_spaces=False, padding_side="right",
    )
