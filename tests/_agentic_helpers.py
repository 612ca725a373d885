"""Shared helpers for the agentic tests: a tiny random-init Qwen2 model (fp32)."""
from __future__ import annotations

import torch


def tiny_qwen2(attn: str = "sdpa", seed: int = 0, vocab_size: int = 64, **overrides):
    """A tiny random Qwen2 causal LM (course_lib.training.tinymodel.tiny_config when it exists)."""
    from transformers import AutoModelForCausalLM, Qwen2Config

    kw = dict(vocab_size=vocab_size, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
              num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
              tie_word_embeddings=False)
    kw.update(overrides)
    try:
        from course_lib.training.tinymodel import tiny_config
        config = tiny_config(**kw)
    except Exception:
        config = Qwen2Config(**kw)
    config._attn_implementation = attn
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, attn_implementation=attn).float()
    model.eval()  # no dropout
    return model
