"""The tiny model itself: its tokenizer, its config, its pretraining loop, and the cached build (what the
folder holds and how it is built: the package docstring, :mod:`course_lib.training.tinymodel`).
Introduced in lesson 04.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import math
import random
import sys
import time
from pathlib import Path
from typing import Any, Iterator, Sequence

from course_lib import store
from course_lib.paths import display_path
from course_lib.profiles import ProfileLike, resolve_profile
from course_lib.training.tinymodel import pretraining_data
from course_lib.training.tinymodel.pretraining_data import PretrainingCorpus
from course_lib.training.tinymodel.tokenizer import EOT, IM_END, SPECIAL_TOKENS, to_transformers_tokenizer, train_tokenizer

BUILD_VERSION = 4  # bump when the code that builds the model changes what it builds
MODEL_NAMES = {"base": 0.5, "nofim": 0.0}  # name -> fim_rate of its pretraining

# --- model config --------------------------------------------------------------------------------

def tiny_config(**overrides: Any):
    """A small Qwen2 config (random init when given to ``Qwen2ForCausalLM``): by default the shape of
    the course's tiny model (vocab 4,096, hidden 192, 4 layers, ~2.4M parameters); pass e.g.
    ``hidden_size=32, num_hidden_layers=1, vocab_size=128`` for fast unit tests. Introduced in lesson 04."""
    from transformers import Qwen2Config

    values: dict[str, Any] = dict(
        vocab_size=4096, hidden_size=192, intermediate_size=512, num_hidden_layers=4,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=2048, rope_theta=10000.0,
        tie_word_embeddings=True, bos_token_id=0, eos_token_id=2, pad_token_id=0,
        use_sliding_window=False, torch_dtype="float32",
    )
    values.update(overrides)
    return Qwen2Config(**values)


def _model_settings(profile: ProfileLike) -> dict[str, Any]:
    S = resolve_profile(profile).tiny_model
    return {k: S[k] for k in S}


def _model_config(name: str, settings: dict[str, Any]) -> dict[str, Any]:
    """What decides a tiny model besides its corpus (the store's upstream): name, FIM rate, settings,
    the FIM data version, the build version and the Python version."""
    from course_lib.training.fim import PERMUTE_VERSION

    return {"name": name, "fim_rate": MODEL_NAMES[name], "settings": settings, "fim": PERMUTE_VERSION,
            "version": BUILD_VERSION, "python": list(sys.version_info[:2])}


def _model_key(name: str, profile: ProfileLike) -> dict[str, Any]:
    """The tiny model's cache key: :func:`_model_config`, plus the training seed when it is not the
    profile's default 0 (lesson 04 run with another ``SEED`` trains its own pair of models, as another
    machine would; seed 0 keeps the key every earlier build used)."""
    P = resolve_profile(profile)
    config = _model_config(name, _model_settings(P))
    return {**config, "seed": P.seed} if P.seed else config


# --- training ------------------------------------------------------------------------------------

def pack_windows(docs: Sequence[Sequence[int]], seq_len: int, eot_id: int) -> list[list[int]]:
    """Concatenate tokenized documents, each followed by ``<EOT>``, and cut the stream into windows of
    ``seq_len`` tokens (the last partial window is dropped). Introduced in lesson 04."""
    stream: list[int] = []
    for d in docs:
        stream.extend(d)
        stream.append(eot_id)
    return [stream[i:i + seq_len] for i in range(0, len(stream) - seq_len + 1, seq_len)]


def fim_eval_examples(texts: Sequence[str], tokenizer, seq_len: int, n: int, seed: int = 0,
                      sentinels: str = "qwen2.5-coder") -> list[tuple[list[int], list[int]]]:
    """Held-out PSM examples for the middle-token loss: ``(input_ids, labels)`` pairs whose labels
    keep the middle tokens only (``course_lib.training.fim.middle_only_labels``). Introduced in lesson 04."""
    from course_lib.training.fim import get_sentinels, middle_only_labels, psm_transform, split_document

    s = get_sentinels(sentinels)
    rng = random.Random(seed)
    mid_id, eot_id = tokenizer.token_to_id(s.middle), tokenizer.token_to_id(s.eot)
    out = []
    for text in texts:
        if len(out) >= n:
            break
        prefix, middle, suffix = split_document(text, rng)
        if not middle.strip():
            continue
        ids = tokenizer.encode(psm_transform(prefix, middle, suffix, s)).ids
        if len(ids) > seq_len:
            continue
        out.append((ids, middle_only_labels(ids, mid_id, eot_id)))
    return out


def _lr_at(step: int, total: int, peak: float, warmup: int) -> float:
    if step < warmup:
        return peak * (step + 1) / warmup
    progress = (step - warmup) / max(1, total - warmup)
    return peak * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))


def _batched(items: list, size: int) -> Iterator[list]:
    for i in range(0, len(items), size):
        yield items[i:i + size]


@contextlib.contextmanager
def seeded(seed: int):
    import torch

    state = torch.random.get_rng_state()
    torch.manual_seed(seed)
    try:
        yield
    finally:
        torch.random.set_rng_state(state)


def _eval_losses(model, l2r_windows: list[list[int]], fim_examples, pad_id: int, batch: int = 8
                 ) -> dict[str, float]:
    """Mean token loss over plain held-out windows (left-to-right) and over middle tokens of
    held-out PSM examples (L_FIM)."""
    import torch
    import torch.nn.functional as F

    def mean_loss(pairs):
        total, count = 0.0, 0
        for chunk in _batched(pairs, batch):
            width = max(len(ids) for ids, _ in chunk)
            x = torch.full((len(chunk), width), pad_id, dtype=torch.long)
            y = torch.full((len(chunk), width), -100, dtype=torch.long)
            for i, (ids, labels) in enumerate(chunk):
                x[i, :len(ids)] = torch.tensor(ids)
                y[i, :len(labels)] = torch.tensor(labels)
            logits = model(input_ids=x.to(model.device)).logits[:, :-1].float()
            target = y[:, 1:].to(model.device)
            loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), target.reshape(-1),
                                   ignore_index=-100, reduction="sum")
            total += float(loss)
            count += int((target != -100).sum())
        return total / max(1, count)

    model.eval()
    with torch.no_grad():
        result = {"l2r_loss": mean_loss([(w, w) for w in l2r_windows]),
                  "middle_loss": mean_loss(fim_examples)}
    model.train()
    return result


def pretrain(model, tokenizer, windows: list[list[int]], *, fim_rate: float, spm_rate: float = 0.5,
             sentinels: str = "qwen2.5-coder", steps: int, batch_size: int, learning_rate: float,
             warmup_steps: int = 10, seed: int = 0, eval_every: int = 20,
             eval_sets: tuple[list, list] | None = None, progress: bool = True) -> dict[str, Any]:
    """Pretrain ``model`` for exactly ``steps`` optimizer steps on packed ``windows`` with
    context-level FIM at ``fim_rate``. Returns the log: per-step train loss, periodic held-out
    left-to-right and middle-token losses, FIM mode counts, tokens and seconds. Introduced in lesson 04."""
    import torch
    from tqdm import tqdm  # a text bar: a saved notebook shows its last state (a widget bar saves "0%")

    from course_lib.training.fim import apply_fim_context_level, fim_mode_counts, get_sentinels

    s = get_sentinels(sentinels)
    pad_id = tokenizer.token_to_id(s.pad)
    rng = random.Random(seed)
    order = list(range(len(windows)))
    rng.shuffle(order)
    need = steps * batch_size
    if len(order) < need:
        order = (order * (need // len(order) + 1))[:need]
    torch.manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=learning_rate, betas=(0.9, 0.95), weight_decay=0.1)
    log: dict[str, Any] = {"step": [], "train_loss": [], "eval": [], "fim_rate": fim_rate,
                           "modes": {"plain": 0, "psm": 0, "spm": 0}}
    fim_rng = random.Random(seed + 1)
    start = time.time()
    model.train()
    bar = tqdm(range(steps), desc=f"pretrain fim_rate={fim_rate}", disable=not progress, mininterval=2.0)
    for step in bar:
        if eval_sets and step % eval_every == 0:
            log["eval"].append({"step": step, **_eval_losses(model, *eval_sets, pad_id=pad_id)})
        rows = []
        for idx in order[step * batch_size:(step + 1) * batch_size]:
            window, modes = apply_fim_context_level(windows[idx], tokenizer, fim_rng, fim_rate=fim_rate,
                                                    spm_rate=spm_rate, sentinels=s)
            for k, v in fim_mode_counts(modes).items():
                log["modes"][k] += v
            rows.append(window)
        x = torch.tensor(rows, dtype=torch.long, device=model.device)
        labels = x.masked_fill(x == pad_id, -100)
        for group in opt.param_groups:
            group["lr"] = _lr_at(step, steps, learning_rate, warmup_steps)
        loss = model(input_ids=x, labels=labels).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        log["step"].append(step + 1)
        loss_value = loss.item()
        log["train_loss"].append(round(loss_value, 4))
        bar.set_postfix(loss=f"{loss_value:.3f}")
    if eval_sets:
        log["eval"].append({"step": steps, **_eval_losses(model, *eval_sets, pad_id=pad_id)})
    log["seconds"] = round(time.time() - start, 1)
    log["tokens"] = steps * batch_size * len(windows[0])
    return log


def _build_tokenizer(settings: dict[str, Any], corpus: PretrainingCorpus):
    """Train (or load from the cache) the tokenizer shared by every tiny model of these settings and
    this corpus: on the training documents in a seeded order, up to ``tokenizer_chars`` characters."""
    from tokenizers import Tokenizer

    keyed = {k: settings[k] for k in ("vocab_size", "tokenizer_chars", "repo_chars", "held_out_every")}
    config = {**keyed, "v": BUILD_VERSION, "special": SPECIAL_TOKENS, "py": list(sys.version_info[:2])}

    def build(folder: Path) -> dict[str, Any]:
        docs = corpus.documents("train")
        random.Random(0).shuffle(docs)
        texts, size = [], 0
        for t in docs:
            if size >= settings["tokenizer_chars"]:
                break
            texts.append(t)
            size += len(t)
        train_tokenizer(texts, settings["vocab_size"]).save(str(folder / "tokenizer.json"))
        return {"documents": len(texts), "chars": size}

    art = store.get_or_build("models", "tokenizer", config, build, upstream=[corpus.info["fingerprint"]])
    return Tokenizer.from_file(str(art.path / "tokenizer.json"))


def encode_documents(tok, docs: Sequence[str]) -> list[list[int]]:
    """Token ids of each document (a ``tokenizers.Tokenizer``; special tokens such as
    ``<|file_sep|>`` stay single tokens). Introduced in lesson 04."""
    return [e.ids for chunk in _batched(list(docs), 256) for e in tok.encode_batch(chunk)]


def build_tiny_model(out_dir: str | Path, name: str = "base", profile: ProfileLike = "ci", *,
                     train_steps: int | None = None, progress: bool = True) -> dict[str, Any]:
    """Build the tiny model ``name`` into ``out_dir`` (a Hugging Face folder) and return its metadata.

    Pretraining text: :func:`pretraining_corpus` — per training repository its dependency-ordered
    sample, packed into ``seq_len`` windows with ``<|endoftext|>`` between repositories; the windows
    are drawn in a seeded order. Held-out repositories give the evaluation windows and FIM examples.
    ``train_steps`` overrides the profile's step budget (tests use a handful). Introduced in lesson 04."""
    import torch
    from transformers import GenerationConfig, Qwen2ForCausalLM

    P = resolve_profile(profile)
    if name not in MODEL_NAMES:
        raise ValueError(f"unknown tiny model {name!r}; choose one of {', '.join(MODEL_NAMES)}")
    settings = _model_settings(P)
    steps = settings["train_steps"] if train_steps is None else int(train_steps)
    seed = P.seed
    t0 = time.time()
    corpus = pretraining_data.pretraining_corpus(P)
    tok = _build_tokenizer(settings, corpus)
    hf_tok = to_transformers_tokenizer(tok, settings["max_position_embeddings"])
    seq_len, eot_id = settings["seq_len"], tok.token_to_id(EOT)

    windows = pack_windows(encode_documents(tok, corpus.documents("train")), seq_len, eot_id)
    # held-out repositories only: their samples for left-to-right windows, their snippets for FIM
    l2r_eval = pack_windows(encode_documents(tok, corpus.documents("held_out")), seq_len, eot_id)
    l2r_eval = [l2r_eval[i] for i in sorted(random.Random(seed).sample(
        range(len(l2r_eval)), min(len(l2r_eval), settings["eval_windows"])))]
    held_snippets = corpus.snippets("held_out")
    random.Random(seed).shuffle(held_snippets)
    fim_eval = fim_eval_examples(held_snippets, tok, seq_len, settings["eval_fim_examples"], seed)
    if not l2r_eval or not fim_eval:
        raise RuntimeError(f"too little held-out text ({corpus.info['held_out_repos']} repositories) for "
                           f"evaluation: {len(l2r_eval)} windows, {len(fim_eval)} FIM examples")
    corpus_info = {**corpus.info, "train_windows": len(windows),
                   "train_tokens": len(windows) * seq_len}

    config = tiny_config(
        vocab_size=tok.get_vocab_size(), hidden_size=settings["hidden_size"],
        intermediate_size=settings["intermediate_size"], num_hidden_layers=settings["num_layers"],
        num_attention_heads=settings["num_heads"], num_key_value_heads=settings["num_kv_heads"],
        max_position_embeddings=settings["max_position_embeddings"],
        bos_token_id=eot_id, eos_token_id=tok.token_to_id(IM_END), pad_token_id=eot_id)
    # the full profile trains on its GPU when there is one; ci always on CPU
    device = "cuda" if P.device == "cuda" and torch.cuda.is_available() else "cpu"
    with seeded(seed):
        model = Qwen2ForCausalLM(config).to(device)
        log = pretrain(model, tok, windows, fim_rate=MODEL_NAMES[name], spm_rate=settings["spm_rate"],
                       sentinels=P.fim.sentinels, steps=steps, batch_size=settings["batch_size"],
                       learning_rate=settings["learning_rate"], warmup_steps=settings["warmup_steps"],
                       seed=seed, eval_every=settings["eval_every"], eval_sets=(l2r_eval, fim_eval),
                       progress=progress)

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    model.to("cpu").save_pretrained(out, safe_serialization=True)
    hf_tok.save_pretrained(out)
    GenerationConfig(bos_token_id=eot_id, eos_token_id=[tok.token_to_id(IM_END), eot_id],
                     pad_token_id=eot_id, do_sample=False, max_new_tokens=128).save_pretrained(out)
    meta = {"name": name, "profile": P.name, "fim_rate": MODEL_NAMES[name], "train_steps": steps,
            "seed": seed, "settings": settings, "parameters": int(sum(p.numel() for p in model.parameters())),
            "corpus": corpus_info, "train_windows": len(windows), "tokens_seen": log["tokens"],
            "epochs": round(log["tokens"] / max(1, len(windows) * seq_len), 2),
            "train_seconds": log["seconds"], "build_seconds": round(time.time() - t0, 1),
            "fim_sentinels": P.fim.sentinels, "torch_threads": torch.get_num_threads(), "device": device}
    (out / "training_log.json").write_text(json.dumps(log))
    (out / "course_model.json").write_text(json.dumps(meta, indent=1))
    return meta


def _model_artefact_args(name: str, profile: ProfileLike) -> tuple[str, dict[str, Any], list[str]]:
    P = resolve_profile(profile)
    if name not in MODEL_NAMES:
        raise ValueError(f"unknown tiny model {name!r}; choose one of {', '.join(MODEL_NAMES)}")
    _, fingerprint = pretraining_data.corpus_repositories(P)
    return f"course-tiny-{name}-{P.name}", _model_key(name, P), [fingerprint]


def with_seed(profile: ProfileLike, seed: int, *, train_steps: int | None = None):
    """``profile`` with training seed ``seed``: the tiny models built from it are another pair, cached
    beside the seed-0 pair the later lessons use (lesson 04 with ``SEED = 1`` trains its own, as another
    machine would). ``train_steps`` (None: the profile's ``tiny_model.train_steps``) gives a pair trained
    for another step budget, cached under its own key: CI's perturbed run of lesson 04 trains a short pair,
    because every assert of that lesson is an invariant of the code, not an outcome of the training
    (docs/claims.md). Introduced in lesson 04."""
    import dataclasses

    from course_lib.profiles import Section

    P = resolve_profile(profile)
    if P.seed != seed:
        P = dataclasses.replace(P, seed=int(seed))
    if train_steps is not None and int(train_steps) != P.tiny_model.train_steps:
        if int(train_steps) < 1:
            raise ValueError(f"train_steps must be a positive number of steps, got {train_steps!r}")
        sections = dict(P.sections)
        sections["tiny_model"] = Section("tiny_model", {**P.tiny_model, "train_steps": int(train_steps)})
        P = dataclasses.replace(P, sections=sections)
    return P


def tiny_model_dir(name: str = "base", profile: ProfileLike = "ci") -> Path:
    """Where ``get_tiny_model(name, profile)`` keeps (or will keep) the model; built or not. The
    folder's key (:mod:`course_lib.store`) covers the profile's settings and the fingerprint of the
    corpus it is trained on (a changed corpus means another folder, so the model is rebuilt).
    Introduced in lesson 04."""
    P = resolve_profile(profile)
    stem, config, upstream = _model_artefact_args(name, P)
    return store.artefact_path("models", stem, config, upstream=upstream)


def get_tiny_model(name: str = "base", profile: ProfileLike = "ci", *, rebuild: bool = False) -> Path:
    """The folder of the course's tiny model ``name`` ("base": pretrained with FIM at rate 0.5;
    "nofim": the same budget without FIM), built on first call and cached after through
    :mod:`course_lib.store` (atomic, locked against concurrent builds). Load it with
    ``AutoModelForCausalLM.from_pretrained(path)`` and ``AutoTokenizer.from_pretrained(path)``.
    Introduced in lesson 04."""
    P = resolve_profile(profile)
    stem, config, upstream = _model_artefact_args(name, P)
    final = store.artefact_path("models", stem, config, upstream=upstream)
    if store.is_complete(final) and not rebuild:
        return final
    with store.file_lock(final.with_name(final.name + ".lock")):
        def build(folder: Path) -> dict[str, Any]:
            print(f"building the tiny model {name!r} ({P.name}) into {display_path(final)} ...",
                  file=sys.stderr)
            return build_tiny_model(folder, name, P)

        art = store.get_or_build("models", stem, config, build, upstream=upstream,
                                 rebuild=rebuild)
    return art.path


def course_tokenizer(profile: ProfileLike = "ci"):
    """The course's tokenizer as a transformers fast tokenizer (trained on first call, cached; the
    same one every tiny model of this profile uses). Introduced in lesson 04."""
    P = resolve_profile(profile)
    settings = _model_settings(P)
    return to_transformers_tokenizer(_build_tokenizer(settings, pretraining_data.pretraining_corpus(P)),
                                     settings["max_position_embeddings"])


def main(argv: list[str] | None = None) -> int:
    """``python -m course_lib model [--name base|nofim|all] [--profile ci|full] [--rebuild]``.

    Introduced in lesson 04."""
    p = argparse.ArgumentParser(prog="course model",
                                description="Build the course's tiny code model (lesson 04) into the cache.")
    p.add_argument("--name", default="base", choices=[*MODEL_NAMES, "all"])
    p.add_argument("--profile", default="ci")
    p.add_argument("--rebuild", action="store_true", help="train again even when cached")
    args = p.parse_args(argv)
    for name in (list(MODEL_NAMES) if args.name == "all" else [args.name]):
        path = get_tiny_model(name, args.profile, rebuild=args.rebuild)
        meta = json.loads((path / "course_model.json").read_text())
        last = json.loads((path / "training_log.json").read_text())["eval"][-1]
        print(f"{name}: {path}\n  {meta['parameters']:,} parameters, {meta['train_steps']} steps, "
              f"{meta['tokens_seen']:,} tokens, trained in {meta['train_seconds']} s; held-out "
              f"left-to-right loss {last['l2r_loss']:.3f}, middle loss {last['middle_loss']:.3f}")
    return 0
