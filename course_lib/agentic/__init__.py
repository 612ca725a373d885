"""Agentic post-training mechanisms of the KAT-Coder reports, each small enough to run on a CPU.

One module per mechanism (lessons 08 and 09):

* :mod:`~course_lib.agentic.tree` — tree training / trie packing (tree attention mask, position ids,
  branch-count loss weights);
* :mod:`~course_lib.agentic.emsft` — error-masked SFT;
* :mod:`~course_lib.agentic.envs` — verifiable environments (AutoBuilder-style F2P/P2P in the sandbox);
* :mod:`~course_lib.agentic.grpo` — GRPO advantages with difficulty and entropy weighting;
* :mod:`~course_lib.agentic.turns` — turn-level importance ratios and MCLA;
* :mod:`~course_lib.agentic.critic` — asymmetric PPO/GAE with a hindsight critic (toy experiment);
* :mod:`~course_lib.agentic.rule_rewards` — the three-layer rule reward;
* :mod:`~course_lib.agentic.distill` — on-policy distillation with top-k gating, the joint RL + OPD
  objective, fusion through output distributions;
* :mod:`~course_lib.agentic.harness` — the RL datum, multi-harness randomisation, token pass-through;
* :mod:`~course_lib.agentic.trajectories` — process rule filters, hint-assisted recovery,
  reference-guided RFT.

Introduced in lesson 08.
"""
from __future__ import annotations


def load_lesson_model(profile: str = "ci", *, attn: str = "sdpa", seed: int = 0, build: bool = False):
    """The causal LM the agentic lessons run on, in fp32 and eval mode, and a line saying which it is.

    The course's tiny model from lesson 04 when it is already in the cache (or ``build=True``: build it
    now, minutes on a CPU); otherwise a small random-init Qwen2 from ``tiny_config`` — every check of
    lessons 08–09 holds for any weights, and the returned line says which model ran
    (``model.lesson_model_kind`` is ``"tiny"`` or ``"random"``).
    Introduced in lesson 08.
    """
    import torch
    from transformers import AutoModelForCausalLM, Qwen2Config

    small = dict(vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                 num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024,
                 initializer_range=0.1, tie_word_embeddings=False)
    try:
        from course_lib.training import tinymodel
    except ImportError as exc:
        reason, config = f"course_lib.training.tinymodel is not available ({exc})", Qwen2Config(**small)
    else:
        config = tinymodel.tiny_config(**small)
        try:
            ready = (tinymodel.tiny_model_dir("base", profile) / "model.safetensors").exists()
            if ready or build:
                path = tinymodel.get_tiny_model("base", profile=profile)
                model = AutoModelForCausalLM.from_pretrained(path, attn_implementation=attn,
                                                             dtype=torch.float32)
                model.lesson_model_kind = "tiny"
                model.lesson_model_path = str(path)
                return model.eval(), f"the course's tiny model from lesson 04 ({path.name})"
            reason = ("lesson 04's tiny model is not built yet (run lesson 04 or `./course model`, "
                      "or pass build=True)")
        except Exception as exc:  # a broken cache must not stop the lesson: say why
            reason = f"the tiny model could not be loaded ({type(exc).__name__}: {exc})"
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, attn_implementation=attn).float().eval()
    model.lesson_model_kind = "random"
    return model, (f"a random-init tiny Qwen2 (vocab {config.vocab_size}, {config.num_hidden_layers} layers) "
                   f"because {reason}")


class LessonTokenizer:
    """``encode(text) -> ids`` / ``decode(ids) -> text`` for the lesson model, and ``note`` saying which."""

    def __init__(self, encode, decode, note: str):
        self.encode, self.decode, self.note = encode, decode, note

    def __call__(self, text: str) -> list[int]:
        return self.encode(text)


def lesson_tokenizer(model) -> LessonTokenizer:
    """The tokenizer that belongs to ``model`` from :func:`load_lesson_model`: the course's BPE
    tokenizer saved with the tiny model (special tokens such as ``<|im_start|>`` stay single ids), or,
    for the random-init fallback (which no tokenizer was ever trained for), one id per UTF-8 byte —
    valid because that model's vocabulary has at least 256 ids. Introduced in lesson 08."""
    if getattr(model, "lesson_model_kind", "") == "tiny":
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(model.lesson_model_path)
        return LessonTokenizer(lambda text: tok.encode(text, add_special_tokens=False),
                               lambda ids: tok.decode(list(ids)),
                               f"the tiny model's own BPE tokenizer (vocab {len(tok)})")
    vocab = int(model.config.vocab_size)
    if vocab < 256:
        raise ValueError(f"byte tokens need a vocab of at least 256 ids; this model's vocab is {vocab}")
    return LessonTokenizer(lambda text: list(text.encode("utf-8")),
                           lambda ids: bytes(int(i) for i in ids).decode("utf-8", errors="replace"),
                           f"one id per UTF-8 byte (the random-init model has no trained tokenizer; vocab {vocab})")
