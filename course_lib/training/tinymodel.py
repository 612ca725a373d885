"""The course's own tiny code model, trained on CPU in lesson 04 and reused by lessons 05-08.

``get_tiny_model("base")`` returns a standard Hugging Face folder (config.json, model.safetensors,
tokenizer.json, tokenizer_config.json, special_tokens_map.json, generation_config.json) that
``AutoModelForCausalLM`` / ``AutoTokenizer`` load like any hub model and that LLaMA-Factory trains with
``template: qwen``. It is built on first call (same code, same seed) and cached after, keyed by the
config that made it:

1. a code corpus: Python standard-library source of the running interpreter, cut into snippets
   (held-out files kept apart for evaluation);
2. a byte-level BPE tokenizer (``tokenizers``, 4,096 tokens, Qwen2's pre-tokenizer regex) with
   ``<|endoftext|>``, ChatML markers and both styles of FIM sentinels as special tokens;
3. a Qwen2-architecture decoder of ~2.4M parameters pretrained for a fixed number of steps with
   context-level FIM (``course_lib.training.fim``) at ``fim_rate`` 0.5 ("base") or without FIM ("nofim", the
   lesson's control run).

Introduced in lesson 04.
"""
from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import math
import random
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Sequence

from course_lib import store
from course_lib.paths import display_path
from course_lib.profiles import get_profile

BUILD_VERSION = 4  # bump when the code that builds the model changes what it builds

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

MODEL_NAMES = {"base": 0.5, "nofim": 0.0}  # name -> fim_rate of its pretraining

# --- corpus: the output of lessons 01-03 ----------------------------------------------------------

@dataclass
class RepoFiles:
    """One repository of the course corpus: its files in dependency order (lesson 03)."""

    name: str
    paths: list[str]
    texts: list[str]

    def sample(self, max_chars: int | None = None, *, order: Sequence[int] | None = None,
               file_chars: int | None = None) -> str:
        """The repository as one Qwen2.5-Coder style sample, ``<|repo_name|>name`` then
        ``<|file_sep|>path`` + content per file: in dependency order, or in ``order`` (indices into
        ``paths``); each file cut to its first ``file_chars`` characters and the whole sample to its
        first ``max_chars``, both at a line end. Introduced in lesson 04."""
        idx = range(len(self.paths)) if order is None else order
        parts = [f"{QWEN_FIM[4]}{self.name}\n"]
        for i in idx:
            parts.append(f"{QWEN_FIM[5]}{self.paths[i]}\n{_head(self.texts[i], file_chars).rstrip(chr(10))}\n")
        return _head("".join(parts), max_chars)


def _head(text: str, max_chars: int | None) -> str:
    """The first ``max_chars`` characters of ``text``, cut back to the last line end (whole text when
    it is short enough or ``max_chars`` is None)."""
    if max_chars is None or len(text) <= max_chars:
        return text
    cut = text.rfind("\n", 0, max_chars) + 1
    return text[:cut] if cut > 0 else text[:max_chars]


def corpus_repositories(profile: str = "ci") -> tuple[list[RepoFiles], str]:
    """The course corpus as lessons 01-03 leave it — licensed, filtered, redacted, deduplicated, one
    entry per repository with its files in dependency order (``deps.load_ordered_corpus``, which
    builds lessons 01-03's artefacts when they are not cached; the file contents come from
    ``dedup.load_deduped_corpus``) — and its fingerprint (a hash of every repository's sample). The one
    loader through which lessons 04 and 05 read the corpus. Introduced in lesson 04."""
    from course_lib.data.dedup import load_deduped_corpus
    from course_lib.data.deps import load_ordered_corpus

    ordered = load_ordered_corpus(profile)
    deduped = load_deduped_corpus(profile)
    key = (profile, *(f["filename"] for f in ordered.cache_files + deduped.cache_files))
    if key not in _REPOSITORIES:
        _REPOSITORIES.clear()
        _REPOSITORIES[key] = _read_repositories(profile, ordered, deduped)
    return _REPOSITORIES[key]


_REPOSITORIES: dict[tuple, tuple[list[RepoFiles], str]] = {}  # the last corpus read in this process


def _read_repositories(profile: str, ordered, deduped) -> tuple[list[RepoFiles], str]:
    content = {(r, p): t for r, p, t in zip(deduped["repo"], deduped["path"], deduped["content"])}
    digest = hashlib.sha256()
    repos = []
    for name, paths, text in zip(ordered["repo"], ordered["paths"], ordered["text"]):
        digest.update(name.encode() + b"\0" + text.encode("utf-8", "surrogatepass") + b"\0")
        missing = [p for p in paths if (name, p) not in content]
        if missing:
            raise RuntimeError(f"ordered corpus repository {name!r}: {len(missing)} files are not in the "
                               f"deduplicated corpus (e.g. {missing[0]!r}); the two caches disagree — "
                               f"rebuild with deps.load_ordered_corpus({profile!r}, rebuild=True)")
        repos.append(RepoFiles(name, list(paths), [content[(name, p)] for p in paths]))
    return repos, digest.hexdigest()[:16]


def is_held_out(repo: str, held_out_every: int) -> bool:
    """Whether repository ``repo`` is held out from pretraining (1 in ``held_out_every`` by a hash of
    its name, so the split never changes with the rest of the corpus). Introduced in lesson 04."""
    return int(hashlib.sha1(repo.encode()).hexdigest(), 16) % held_out_every == 0


@dataclass
class PretrainingCorpus:
    """The tiny model's text: per repository the head of its dependency order (Python files only,
    docstrings and comments removed), split by repository into training and held-out repositories."""

    train: list[RepoFiles]
    held_out: list[RepoFiles]
    info: dict[str, Any]

    def documents(self, split: str = "train") -> list[str]:
        """One document per repository (:meth:`RepoFiles.sample`, cut to ``repo_chars``)."""
        return [r.sample(self.info["repo_chars"]) for r in self._split(split)]

    def snippets(self, split: str = "train") -> list[str]:
        """The same files cut into snippets of at most ``snippet_chars`` (:func:`split_into_snippets`)."""
        out = []
        for r in self._split(split):
            for text in r.texts:
                out.extend(split_into_snippets(text, self.info["snippet_chars"]))
        return out

    def _split(self, split: str) -> list[RepoFiles]:
        if split not in ("train", "held_out"):
            raise ValueError(f"split must be 'train' or 'held_out', not {split!r}")
        return self.train if split == "train" else self.held_out


def pretraining_corpus(profile: str = "ci") -> PretrainingCorpus:
    """What the tiny model of ``profile`` is trained and evaluated on: :func:`corpus_repositories`,
    repositories held out by :func:`is_held_out`, and of each repository the Python files in dependency
    order, docstrings and comments removed (:func:`strip_docstrings_and_comments`), up to the profile's
    ``repo_chars`` characters. ``info`` counts repositories, files and characters and holds the
    corpus fingerprint. Introduced in lesson 04."""
    S = get_profile(profile).tiny_model
    repos, fingerprint = corpus_repositories(profile)
    key = (profile, fingerprint, json.dumps(dict(S), sort_keys=True))
    if key not in _PRETRAINING:
        _PRETRAINING.clear()
        _PRETRAINING[key] = _select_pretraining_text(repos, fingerprint, S, profile)
    return _PRETRAINING[key]


_PRETRAINING: dict[tuple, PretrainingCorpus] = {}


def _select_pretraining_text(repos: list[RepoFiles], fingerprint: str, S, profile: str
                             ) -> PretrainingCorpus:
    info: dict[str, Any] = {"source": "deps.load_ordered_corpus", "fingerprint": fingerprint,
                            "repositories": len(repos), "repo_chars": S.repo_chars,
                            "snippet_chars": S.snippet_chars, "held_out_every": S.held_out_every,
                            "files_used": 0, "skipped_not_python": 0, "skipped_unparsable": 0}
    train, held_out = [], []
    for repo in repos:
        paths, texts, size = [], [], len(repo.name) + 16
        for path, text in zip(repo.paths, repo.texts):
            if size >= S.repo_chars:
                break
            if not path.endswith(".py"):
                info["skipped_not_python"] += 1
                continue
            stripped = strip_docstrings_and_comments(text)
            if stripped is None or not stripped.strip():
                info["skipped_unparsable"] += 1
                continue
            paths.append(path)
            texts.append(stripped)
            size += len(path) + len(stripped) + 16
        if not paths:
            continue
        kept = RepoFiles(repo.name, paths, texts)
        (held_out if is_held_out(repo.name, S.held_out_every) else train).append(kept)
        info["files_used"] += len(paths)
    if not train or not held_out:
        raise RuntimeError(f"the corpus of profile {profile!r} gives {len(train)} training and "
                           f"{len(held_out)} held-out repositories; the tiny model needs both "
                           f"(more repositories: profile setting deps.max_repos)")
    info.update(train_repos=len(train), held_out_repos=len(held_out),
                train_chars=sum(len(d) for d in (r.sample(S.repo_chars) for r in train)),
                held_out_names=[r.name for r in held_out])
    return PretrainingCorpus(train, held_out, info)


def strip_docstrings_and_comments(text: str) -> str | None:
    """Remove docstrings and whole-line comments from Python source (None when it does not parse).

    A 2.4M-parameter model trained for a minute cannot learn English prose; without docstrings and
    comments it spends its budget on code structure. Introduced in lesson 04."""
    import ast
    import warnings

    try:
        with warnings.catch_warnings():  # corpus files with invalid escapes ("\.") parse with a warning
            warnings.simplefilter("ignore", (DeprecationWarning, SyntaxWarning))
            tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return None
    drop: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and body:
            first = body[0]
            if (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
                    and isinstance(first.value.value, str)):
                drop.update(range(first.lineno, first.end_lineno + 1))
    lines = text.splitlines(keepends=True)
    kept = [line for i, line in enumerate(lines, 1)
            if i not in drop and not line.lstrip().startswith("#")]
    out, blank = [], 0
    for line in kept:  # at most two blank lines in a row
        blank = blank + 1 if not line.strip() else 0
        if blank <= 2:
            out.append(line)
    return "".join(out)


def split_into_snippets(text: str, max_chars: int = 1200) -> list[str]:
    """Cut a source file into snippets of at most ``max_chars`` characters, preferring top-level
    statement boundaries, then blank lines, then line ends. Introduced in lesson 04."""
    lines = text.splitlines(keepends=True)
    blocks: list[str] = []
    current: list[str] = []
    for line in lines:
        top_level = line[:1] not in (" ", "\t", "\n", "\r", "") and not line.startswith((")", "]", "}"))
        if top_level and current and not current[-1].lstrip().startswith("@"):
            blocks.append("".join(current))
            current = []
        current.append(line)
    if current:
        blocks.append("".join(current))
    # merge small blocks, break big ones
    snippets: list[str] = []
    buf = ""
    for block in blocks:
        while len(block) > max_chars:
            cut = block.rfind("\n\n", 0, max_chars)
            cut = cut + 2 if cut > max_chars // 3 else block.rfind("\n", 0, max_chars) + 1
            if cut <= 0:
                cut = max_chars
            if buf:
                snippets.append(buf)
                buf = ""
            snippets.append(block[:cut])
            block = block[cut:]
        if len(buf) + len(block) > max_chars and buf:
            snippets.append(buf)
            buf = ""
        buf += block
    if buf:
        snippets.append(buf)
    return [s for s in snippets if s.strip()]


# --- tokenizer -----------------------------------------------------------------------------------

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


def _model_settings(profile: str) -> dict[str, Any]:
    P = get_profile(profile).tiny_model
    return {k: P[k] for k in P}


def _model_config(name: str, settings: dict[str, Any]) -> dict[str, Any]:
    """What decides a tiny model besides its corpus (the store's upstream): name, FIM rate, settings,
    the FIM data version, the build version and the Python version."""
    from course_lib.training.fim import PERMUTE_VERSION

    return {"name": name, "fim_rate": MODEL_NAMES[name], "settings": settings, "fim": PERMUTE_VERSION,
            "version": BUILD_VERSION, "python": list(sys.version_info[:2])}


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
def _seeded(seed: int):
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


def repeat_copy_loss(model_dir: str | Path, *, sequences: int = 8, length: int = 40, seed: int = 0) -> dict[str, float]:
    """Can the model copy? Random token sequences, each shown twice in a row: the mean loss (nats/token)
    on the first copy and on the second. A model that copies from its context (the "induction heads"
    of Olsson et al., 2022) has a much lower loss on the second copy; one that cannot has the same loss
    on both. Copying is what a model needs to reuse a function or argument name from its prompt.
    Introduced in lesson 07."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(model_dir)).eval()
    vocab = int(model.config.vocab_size)
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(min(100, vocab // 4), vocab, (sequences, length), generator=g)
    ids = torch.cat([x, x], dim=1)
    with torch.no_grad():
        logp = torch.log_softmax(model(ids).logits[:, :-1].float(), dim=-1)
    nll = -logp.gather(-1, ids[:, 1:, None])[..., 0]
    return {"first copy": round(float(nll[:, : length - 1].mean()), 3),
            "second copy": round(float(nll[:, length:].mean()), 3)}


# --- lesson 03's claim: dependency order vs shuffled order ----------------------------------------

def repo_token_stream(repo: RepoFiles, tok, order: Sequence[int] | None = None,
                      file_chars: int | None = None) -> tuple[list[int], list[int]]:
    """Token ids of ``repo`` as one sample (:meth:`RepoFiles.sample` with the files in ``order``,
    default dependency order, each cut to ``file_chars``) and, per token, the dependency-order index
    of the file it belongs to (-1 for the ``<|repo_name|>`` header). ``tok`` is a
    ``tokenizers.Tokenizer``. Introduced in lesson 04."""
    ids = tok.encode(f"{QWEN_FIM[4]}{repo.name}\n").ids
    owner = [-1] * len(ids)
    for i in (range(len(repo.paths)) if order is None else order):
        piece = f"{QWEN_FIM[5]}{repo.paths[i]}\n{_head(repo.texts[i], file_chars).rstrip(chr(10))}\n"
        enc = tok.encode(piece).ids
        ids += enc
        owner += [i] * len(enc)
    return ids, owner


def later_files_loss(model, tok, repos: Sequence[RepoFiles], seq_len: int,
                     file_chars: int | None = None) -> dict[str, float]:
    """Mean token loss of ``model`` on held-out repositories read in dependency order: the first
    ``seq_len`` tokens of each repository (:func:`repo_token_stream`); of the files that start in that
    window, the loss on the later half (``later``: the P(f_i | f_<i) terms with the most context from
    the same repository) and on the earlier half (``earlier``). Introduced in lesson 04."""
    import torch
    import torch.nn.functional as F

    sums = {"later": [0.0, 0], "earlier": [0.0, 0]}
    model.eval()
    with torch.no_grad():
        for repo in repos:
            ids, owner = repo_token_stream(repo, tok, file_chars=file_chars)
            ids, owner = ids[:seq_len], owner[:seq_len]
            present = sorted({o for o in owner if o >= 0})
            if len(present) < 2:
                continue
            later = set(present[(len(present) + 1) // 2:])
            x = torch.tensor([ids], dtype=torch.long, device=model.device)
            logits = model(input_ids=x).logits[0, :-1].float()
            losses = F.cross_entropy(logits, x[0, 1:], reduction="none").tolist()
            for t, loss in enumerate(losses, start=1):
                if owner[t] >= 0:
                    part = sums["later" if owner[t] in later else "earlier"]
                    part[0] += loss
                    part[1] += 1
    model.train()
    out: dict[str, float] = {k: v[0] / v[1] if v[1] else float("nan") for k, v in sums.items()}
    out.update(later_tokens=sums["later"][1], earlier_tokens=sums["earlier"][1])
    return out


def order_experiment(model, tok, train_repos: Sequence[RepoFiles], eval_repos: Sequence[RepoFiles], *,
                     steps: int, batch_size: int, seq_len: int, file_chars: int | None,
                     learning_rate: float, seed: int = 0, progress: bool = False) -> dict[str, Any]:
    """Continue training copies of ``model`` for ``steps`` steps on ``train_repos`` read in two
    orders — each repository's files in dependency order, or shuffled within the repository (seeded) —
    with the same files, step budget and seed otherwise; then measure :func:`later_files_loss` on
    ``eval_repos`` (read in dependency order) before and after. ``difference`` is shuffled minus
    dependency on the later files: positive when dependency order helps. Introduced in lesson 04."""
    import copy

    eot_id = tok.token_to_id(EOT)
    result: dict[str, Any] = {"steps": steps, "batch_size": batch_size, "seq_len": seq_len,
                              "file_chars": file_chars, "seed": seed, "train_repos": len(train_repos),
                              "eval_repos": len(eval_repos),
                              "before": later_files_loss(model, tok, eval_repos, seq_len, file_chars)}
    for arm in ("dependency", "shuffled"):
        rng = random.Random(seed)
        docs = []
        for repo in train_repos:
            order = list(range(len(repo.paths)))
            if arm == "shuffled":
                rng.shuffle(order)
            docs.append(repo_token_stream(repo, tok, order, file_chars)[0])
        windows = pack_windows(docs, seq_len, eot_id)
        if not windows:
            raise ValueError(f"the training repositories give no window of {seq_len} tokens")
        trained = copy.deepcopy(model)
        log = pretrain(trained, tok, windows, fim_rate=0.0, steps=steps, batch_size=batch_size,
                       learning_rate=learning_rate, warmup_steps=max(1, steps // 10), seed=seed,
                       progress=progress)
        result[arm] = {**later_files_loss(trained, tok, eval_repos, seq_len, file_chars),
                       "windows": len(windows), "seconds": log["seconds"],
                       "final_train_loss": log["train_loss"][-1]}
    result["difference"] = result["shuffled"]["later"] - result["dependency"]["later"]
    return result


def dependency_order_experiment(profile: str = "ci", *, seed: int | None = None,
                                progress: bool = False) -> dict[str, Any]:
    """Lesson 03's claim, P(repo) = prod_i P(f_i | f_<i), on the course's tiny model: continue
    pretraining the ``base`` model (:func:`get_tiny_model`) on the training repositories in dependency
    order vs shuffled order (:func:`order_experiment`, settings from the profile's ``dependency_order``
    section) and compare the loss on the later files of the first ``eval_repos`` held-out
    repositories that have two files or more. ``seed`` (default: the profile's) picks the shuffles
    and the window order. Introduced in lesson 04."""
    import torch
    from tokenizers import Tokenizer
    from transformers import AutoModelForCausalLM

    P = get_profile(profile)
    S = P.dependency_order
    seed = P.seed if seed is None else seed
    corpus = pretraining_corpus(profile)
    path = get_tiny_model("base", profile)
    tok = Tokenizer.from_file(str(path / "tokenizer.json"))
    eval_repos = [r for r in corpus.held_out if len(r.paths) >= 2][: S.eval_repos]
    with _seeded(seed):
        model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
        return order_experiment(model, tok, corpus.train, eval_repos, steps=S.steps,
                                batch_size=S.batch_size, seq_len=S.seq_len, file_chars=S.file_chars,
                                learning_rate=S.learning_rate, seed=seed, progress=progress)


# --- build + cache -------------------------------------------------------------------------------

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


def build_tiny_model(out_dir: str | Path, name: str = "base", profile: str = "ci", *,
                     train_steps: int | None = None, progress: bool = True) -> dict[str, Any]:
    """Build the tiny model ``name`` into ``out_dir`` (a Hugging Face folder) and return its metadata.

    Pretraining text: :func:`pretraining_corpus` — per training repository its dependency-ordered
    sample, packed into ``seq_len`` windows with ``<|endoftext|>`` between repositories; the windows
    are drawn in a seeded order. Held-out repositories give the evaluation windows and FIM examples.
    ``train_steps`` overrides the profile's step budget (tests use a handful). Introduced in lesson 04."""
    import torch
    from transformers import GenerationConfig, Qwen2ForCausalLM

    if name not in MODEL_NAMES:
        raise ValueError(f"unknown tiny model {name!r}; choose one of {', '.join(MODEL_NAMES)}")
    settings = _model_settings(profile)
    steps = settings["train_steps"] if train_steps is None else int(train_steps)
    seed = get_profile(profile).seed
    t0 = time.time()
    corpus = pretraining_corpus(profile)
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
    device = "cuda" if get_profile(profile).device == "cuda" and torch.cuda.is_available() else "cpu"
    with _seeded(seed):
        model = Qwen2ForCausalLM(config).to(device)
        log = pretrain(model, tok, windows, fim_rate=MODEL_NAMES[name], spm_rate=settings["spm_rate"],
                       sentinels=get_profile(profile).fim.sentinels, steps=steps, batch_size=settings["batch_size"],
                       learning_rate=settings["learning_rate"], warmup_steps=settings["warmup_steps"],
                       seed=seed, eval_every=settings["eval_every"], eval_sets=(l2r_eval, fim_eval),
                       progress=progress)

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    model.to("cpu").save_pretrained(out, safe_serialization=True)
    hf_tok.save_pretrained(out)
    GenerationConfig(bos_token_id=eot_id, eos_token_id=[tok.token_to_id(IM_END), eot_id],
                     pad_token_id=eot_id, do_sample=False, max_new_tokens=128).save_pretrained(out)
    meta = {"name": name, "profile": profile, "fim_rate": MODEL_NAMES[name], "train_steps": steps,
            "seed": seed, "settings": settings, "parameters": int(sum(p.numel() for p in model.parameters())),
            "corpus": corpus_info, "train_windows": len(windows), "tokens_seen": log["tokens"],
            "epochs": round(log["tokens"] / max(1, len(windows) * seq_len), 2),
            "train_seconds": log["seconds"], "build_seconds": round(time.time() - t0, 1),
            "fim_sentinels": get_profile(profile).fim.sentinels, "torch_threads": torch.get_num_threads(), "device": device}
    (out / "training_log.json").write_text(json.dumps(log))
    (out / "course_model.json").write_text(json.dumps(meta, indent=1))
    return meta


@contextlib.contextmanager
def _file_lock(path: Path):
    import fcntl

    with open(path, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _model_artefact_args(name: str, profile: str) -> tuple[str, dict[str, Any], list[str]]:
    if name not in MODEL_NAMES:
        raise ValueError(f"unknown tiny model {name!r}; choose one of {', '.join(MODEL_NAMES)}")
    _, fingerprint = corpus_repositories(profile)
    return f"course-tiny-{name}-{profile}", _model_config(name, _model_settings(profile)), [fingerprint]


def tiny_model_dir(name: str = "base", profile: str = "ci") -> Path:
    """Where ``get_tiny_model(name, profile)`` keeps (or will keep) the model; built or not. The
    folder's key (:mod:`course_lib.store`) covers the profile's settings and the fingerprint of the
    corpus it is trained on (a changed corpus means another folder, so the model is rebuilt).
    Introduced in lesson 04."""
    stem, config, upstream = _model_artefact_args(name, profile)
    return store.artefact_path("models", stem, config, upstream=upstream)


def get_tiny_model(name: str = "base", profile: str = "ci", *, rebuild: bool = False) -> Path:
    """The folder of the course's tiny model ``name`` ("base": pretrained with FIM at rate 0.5;
    "nofim": the same budget without FIM), built on first call and cached after through
    :mod:`course_lib.store` (atomic, locked against concurrent builds). Load it with
    ``AutoModelForCausalLM.from_pretrained(path)`` and ``AutoTokenizer.from_pretrained(path)``.
    Introduced in lesson 04."""
    stem, config, upstream = _model_artefact_args(name, profile)
    final = store.artefact_path("models", stem, config, upstream=upstream)
    if store.is_complete(final) and not rebuild:
        return final
    with _file_lock(final.with_name(final.name + ".lock")):
        def build(folder: Path) -> dict[str, Any]:
            print(f"building the tiny model {name!r} ({profile}) into {display_path(final)} ...",
                  file=sys.stderr)
            return build_tiny_model(folder, name, profile)

        art = store.get_or_build("models", stem, config, build, upstream=upstream,
                                 rebuild=rebuild)
    return art.path


def course_tokenizer(profile: str = "ci"):
    """The course's tokenizer as a transformers fast tokenizer (trained on first call, cached; the
    same one every tiny model of this profile uses). Introduced in lesson 04."""
    settings = _model_settings(profile)
    return to_transformers_tokenizer(_build_tokenizer(settings, pretraining_corpus(profile)),
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
