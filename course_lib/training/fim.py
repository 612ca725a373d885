"""Fill-in-the-middle (FIM): teach a left-to-right model to infill.

A document is cut at two uniform random character positions into prefix / middle / suffix and
rearranged with sentinel tokens so that the middle comes last (Bavarian et al. 2022, "Efficient
Training of Language Models to Fill in the Middle"; bigcode Megatron's ``permute``):

* PSM: ``<PRE> prefix <SUF> suffix <MID> middle <EOT>``
* SPM as the lecture (and the FIM paper's main text) writes it: ``<SUF> suffix <PRE> prefix <MID> middle <EOT>``
* SPM as bigcode's training code (StarCoder/SantaCoder, Megatron-LM ``permute``) builds it, the layout
  the course trains with: ``<PRE> <SUF> suffix <MID> prefix middle <EOT>``

A fraction ``fim_rate`` of documents is transformed (half of those as SPM with ``spm_rate=0.5``), the
rest stay plain left-to-right text. The transform can be applied to whole documents before packing
(document level) or to each document fragment inside an already packed training context (context
level, what bigcode does). Introduced in lesson 04.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Sequence

IGNORE_INDEX = -100
PERMUTE_VERSION = 2
"""Bumped when :func:`permute_fragment` changes the training data it makes (part of the tiny model's
cache key)."""


@dataclass(frozen=True)
class FimSentinels:
    """The sentinel strings of one FIM convention. Introduced in lesson 04."""

    style: str
    prefix: str
    middle: str
    suffix: str
    pad: str
    eot: str

    def all(self) -> tuple[str, ...]:
        """The three FIM sentinels (prefix, suffix, middle) in PSM order."""
        return (self.prefix, self.suffix, self.middle)


SENTINEL_STYLES: dict[str, FimSentinels] = {
    # StarCoder / SantaCoder (bigcode)
    "starcoder": FimSentinels("starcoder", "<fim_prefix>", "<fim_middle>", "<fim_suffix>", "<fim_pad>",
                              "<|endoftext|>"),
    # Qwen2.5-Coder (ids 151659-151662 in Qwen's vocabulary); <|endoftext|> ends a document
    "qwen2.5-coder": FimSentinels("qwen2.5-coder", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>",
                                  "<|fim_pad|>", "<|endoftext|>"),
}


def get_sentinels(style: str | FimSentinels = "starcoder") -> FimSentinels:
    """The sentinels of a style name (``"starcoder"`` or ``"qwen2.5-coder"``). Introduced in lesson 04."""
    if isinstance(style, FimSentinels):
        return style
    try:
        return SENTINEL_STYLES[style]
    except KeyError:
        raise ValueError(f"unknown FIM sentinel style {style!r}; choose one of "
                         f"{', '.join(SENTINEL_STYLES)} or pass a FimSentinels") from None


def _rng(seed_or_rng: int | random.Random | None) -> random.Random:
    return seed_or_rng if isinstance(seed_or_rng, random.Random) else random.Random(seed_or_rng)


def split_points(n: int, rng: int | random.Random | None = None) -> tuple[int, int]:
    """Two uniform cut positions ``0 <= lo <= hi <= n`` (sorted), as in Bavarian et al.

    Introduced in lesson 04."""
    if n < 0:
        raise ValueError(f"length must be >= 0, got {n}")
    r = _rng(rng)
    a, b = r.randint(0, n), r.randint(0, n)
    return (a, b) if a <= b else (b, a)


def split_document(text: str, rng: int | random.Random | None = None) -> tuple[str, str, str]:
    """Cut ``text`` at two uniform *character* positions into (prefix, middle, suffix).

    ``prefix + middle + suffix == text`` always. Introduced in lesson 04."""
    lo, hi = split_points(len(text), rng)
    return text[:lo], text[lo:hi], text[hi:]


def split_tokens(ids: Sequence[int], rng: int | random.Random | None = None
                 ) -> tuple[list[int], list[int], list[int]]:
    """Cut a token sequence at two uniform *token* positions into (prefix, middle, suffix).

    The token-level variant: cheaper (no re-tokenization), but the middle always starts and ends on a
    token boundary, so at inference the model never learns to complete a half-typed token such as
    ``retu|`` -> ``rn``. That is why the papers split on characters. Introduced in lesson 04."""
    ids = list(ids)
    lo, hi = split_points(len(ids), rng)
    return ids[:lo], ids[lo:hi], ids[hi:]


def psm_transform(prefix: str, middle: str, suffix: str,
                  sentinels: str | FimSentinels = "starcoder", *, eot: bool = True) -> str:
    """PSM layout: ``<PRE> prefix <SUF> suffix <MID> middle <EOT>``. Introduced in lesson 04."""
    s = get_sentinels(sentinels)
    return f"{s.prefix}{prefix}{s.suffix}{suffix}{s.middle}{middle}" + (s.eot if eot else "")


SPM_LAYOUTS = ("bigcode", "lecture")


def spm_transform(prefix: str, middle: str, suffix: str,
                  sentinels: str | FimSentinels = "starcoder", *, eot: bool = True,
                  layout: str = "bigcode") -> str:
    """SPM layout. ``layout="lecture"``: ``<SUF> suffix <PRE> prefix <MID> middle <EOT>``, as the
    lecture writes it; ``layout="bigcode"`` (the default): ``<PRE> <SUF> suffix <MID> prefix middle
    <EOT>``, what bigcode's Megatron-LM ``permute`` builds for StarCoder and what the course's tiny model
    is trained with, so prompts made here match the training data. In the bigcode layout the prefix
    runs straight into the middle after ``<MID>``: the middle is a plain continuation of the prefix.
    Introduced in lesson 04."""
    s = get_sentinels(sentinels)
    end = s.eot if eot else ""
    if layout == "bigcode":
        return f"{s.prefix}{s.suffix}{suffix}{s.middle}{prefix}{middle}{end}"
    if layout == "lecture":
        return f"{s.suffix}{suffix}{s.prefix}{prefix}{s.middle}{middle}{end}"
    raise ValueError(f"layout must be one of {SPM_LAYOUTS}, got {layout!r}")


def fim_prompt(prefix: str, suffix: str, sentinels: str | FimSentinels = "starcoder",
               mode: str = "psm", *, layout: str = "bigcode") -> str:
    """The inference prompt asking a FIM model for the middle between ``prefix`` and ``suffix``
    (``layout`` chooses the SPM layout, see :func:`spm_transform`). Introduced in lesson 04."""
    if mode == "psm":
        return psm_transform(prefix, "", suffix, sentinels, eot=False)
    if mode == "spm":
        return spm_transform(prefix, "", suffix, sentinels, eot=False, layout=layout)
    raise ValueError(f"mode must be 'psm' or 'spm', got {mode!r}")


def parse_fim(text: str, sentinels: str | FimSentinels = "starcoder") -> tuple[str, str, str, str]:
    """Invert :func:`psm_transform` / :func:`spm_transform`: return (prefix, middle, suffix, mode).

    A plain document (no sentinel) comes back as ``(text, "", "", "plain")``. SPM cannot tell where
    the prefix ends and the middle starts from the text alone, so for SPM the returned prefix holds
    ``prefix + middle`` and middle is ``""``. A PSM string with an empty prefix is the same string as
    an SPM one and reads as SPM. The lecture's SPM layout (starting with ``<SUF>``) keeps the split
    and comes back exactly. Introduced in lesson 04.
    Public: documented in docs/fim_tinymodel.md, for students to call."""
    s = get_sentinels(sentinels)
    body = text[: -len(s.eot)] if text.endswith(s.eot) else text
    if body.startswith(s.suffix):  # the lecture's SPM: <SUF> suffix <PRE> prefix <MID> middle
        suffix, _, rest = body[len(s.suffix):].partition(s.prefix)
        prefix, _, middle = rest.partition(s.middle)
        return prefix, middle, suffix, "spm"
    if not body.startswith(s.prefix):
        return text, "", "", "plain"
    body = body[len(s.prefix):]
    if body.startswith(s.suffix):  # SPM
        suffix, _, rest = body[len(s.suffix):].partition(s.middle)
        return rest, "", suffix, "spm"
    prefix, _, rest = body.partition(s.suffix)
    suffix, _, middle = rest.partition(s.middle)
    return prefix, middle, suffix, "psm"


def fim_transform(text: str, rng: int | random.Random | None = None, *, fim_rate: float = 0.5,
                  spm_rate: float = 0.5, sentinels: str | FimSentinels = "starcoder",
                  eot: bool = True) -> tuple[str, str]:
    """Apply FIM to one document with probability ``fim_rate`` (SPM with probability ``spm_rate``
    among those). Returns ``(new_text, mode)`` with mode in {"plain", "psm", "spm"}; plain text still
    ends with ``<EOT>`` when ``eot``. Introduced in lesson 04."""
    r = _rng(rng)
    s = get_sentinels(sentinels)
    if r.random() >= fim_rate:
        return text + (s.eot if eot else ""), "plain"
    prefix, middle, suffix = split_document(text, r)
    if r.random() < spm_rate:
        return spm_transform(prefix, middle, suffix, s, eot=eot), "spm"
    return psm_transform(prefix, middle, suffix, s, eot=eot), "psm"


def apply_fim_document_level(docs: Sequence[str], seed: int = 0, *, fim_rate: float = 0.5,
                             spm_rate: float = 0.5, sentinels: str | FimSentinels = "starcoder"
                             ) -> tuple[list[str], dict[str, int]]:
    """Document-level FIM: transform each whole document before packing. Returns the new documents
    (each ending in ``<EOT>``) and the count of each mode. Introduced in lesson 04."""
    r = random.Random(seed)
    out, counts = [], {"plain": 0, "psm": 0, "spm": 0}
    for doc in docs:
        new, mode = fim_transform(doc, r, fim_rate=fim_rate, spm_rate=spm_rate, sentinels=sentinels)
        out.append(new)
        counts[mode] += 1
    return out, counts


# --- context level: FIM on packed token windows -------------------------------------------------

class _Codec:
    """encode/decode/token_to_id over a `tokenizers.Tokenizer` or a transformers tokenizer."""

    def __init__(self, tokenizer: Any):
        self.tok = tokenizer
        self.is_hf = hasattr(tokenizer, "convert_tokens_to_ids")

    def encode(self, text: str) -> list[int]:
        if self.is_hf:
            return list(self.tok.encode(text, add_special_tokens=False))
        return list(self.tok.encode(text, add_special_tokens=False).ids)

    def decode(self, ids: Sequence[int]) -> str:
        return self.tok.decode(list(ids), skip_special_tokens=False)

    def token_id(self, token: str) -> int:
        tid = self.tok.convert_tokens_to_ids(token) if self.is_hf else self.tok.token_to_id(token)
        if tid is None or (self.is_hf and tid == self.tok.unk_token_id):
            raise ValueError(f"the tokenizer has no special token {token!r}: add the FIM sentinels "
                             "as special tokens before training (course_lib.training.tinymodel does)")
        return int(tid)


def permute_fragment(ids: Sequence[int], tokenizer: Any, rng: random.Random, *,
                     spm_rate: float = 0.5, sentinels: str | FimSentinels = "starcoder",
                     keep_length: bool = True) -> tuple[list[int], str]:
    """FIM-transform one tokenized fragment (no EOT inside) the way bigcode's Megatron-LM ``permute``
    does: decode, split at two character positions, re-tokenize the three parts, add sentinel ids
    (SPM in the bigcode layout). With ``keep_length`` the fragment keeps its length so packed contexts
    stay full: when the new fragment is longer (three sentinels, and re-tokenizing may add tokens) the
    *suffix* gives up the extra tokens; when it is shorter the suffix is padded with ``<fim_pad>``
    (before ``<MID>``, so the middle is still followed directly by what ends the document). A suffix
    too short to absorb the extra tokens leaves the fragment as plain text, mode ``"plain"``: the
    middle, the part the model learns to infill, is never cut. Returns ``(new_ids, mode)``.
    Introduced in lesson 04."""
    c = _Codec(tokenizer)
    s = get_sentinels(sentinels)
    pre_id, mid_id, suf_id, pad_id = (c.token_id(t) for t in (s.prefix, s.middle, s.suffix, s.pad))
    prefix, middle, suffix = split_document(c.decode(ids), rng)
    p, m, sx = c.encode(prefix), c.encode(middle), c.encode(suffix)
    if keep_length:
        extra = len(p) + len(m) + len(sx) + 3 - len(ids)
        if extra > 0:
            if len(sx) <= extra:  # bigcode: "no space to truncate the suffix" -> keep the sample
                return list(ids), "plain"
            sx = sx[: len(sx) - extra]
        elif extra < 0:
            sx = sx + [pad_id] * (-extra)
    if rng.random() < spm_rate:
        return [pre_id, suf_id, *sx, mid_id, *p, *m], "spm"
    return [pre_id, *p, suf_id, *sx, mid_id, *m], "psm"


def apply_fim_context_level(window: Sequence[int], tokenizer: Any, rng: random.Random, *,
                            fim_rate: float = 0.5, spm_rate: float = 0.5,
                            sentinels: str | FimSentinels = "starcoder") -> tuple[list[int], list[str]]:
    """Context-level FIM (bigcode): split a packed window at ``<EOT>`` into document fragments and
    FIM-transform each with probability ``fim_rate`` (:func:`permute_fragment`); the window keeps its
    length. Returns the new window and the mode of each fragment ("plain" also for a fragment drawn for
    FIM whose suffix could not absorb the sentinels). Introduced in lesson 04."""
    c = _Codec(tokenizer)
    eot_id = c.token_id(get_sentinels(sentinels).eot)
    out: list[int] = []
    modes: list[str] = []
    fragment: list[int] = []

    def flush() -> None:
        if fragment and rng.random() < fim_rate:
            new, mode = permute_fragment(fragment, tokenizer, rng, spm_rate=spm_rate, sentinels=sentinels)
        else:
            new, mode = list(fragment), "plain"
        if fragment:
            modes.append(mode)
        out.extend(new)
        fragment.clear()

    for tid in window:
        if tid == eot_id:
            flush()
            out.append(eot_id)
        else:
            fragment.append(int(tid))
    flush()
    return out, modes


# --- loss masks ----------------------------------------------------------------------------------

def causal_lm_labels(ids: Sequence[int], pad_id: int | None = None) -> list[int]:
    """Labels of plain causal LM training: every token is a target (pads ignored).

    Introduced in lesson 04."""
    return [IGNORE_INDEX if (pad_id is not None and t == pad_id) else int(t) for t in ids]


def middle_token_mask(ids: Sequence[int], middle_id: int, eot_id: int,
                      prefix_id: int | None = None, suffix_id: int | None = None) -> list[bool]:
    """True on the tokens of each FIM middle: after ``<MID>`` up to the next ``<EOT>`` (exclusive).

    In SPM the prefix also comes after ``<MID>``; pass ``prefix_id`` and ``suffix_id`` to recognise
    SPM (``<PRE><SUF>``) and return no middle mask for it, since the split point is unknown from ids
    alone. Introduced in lesson 04."""
    mask, inside, spm = [], False, False
    for i, t in enumerate(ids):
        if t == eot_id:
            inside = False
            spm = False
        if prefix_id is not None and suffix_id is not None and t == prefix_id:
            spm = i + 1 < len(ids) and ids[i + 1] == suffix_id
        mask.append(inside and not spm)
        if t == middle_id:
            inside = True
    return mask


def middle_only_labels(ids: Sequence[int], middle_id: int, eot_id: int) -> list[int]:
    """Labels for L_FIM: the token id on middle tokens, ``-100`` (ignored) everywhere else, so the
    loss sums over middle tokens only. Introduced in lesson 04."""
    mask = middle_token_mask(ids, middle_id, eot_id)
    return [int(t) if keep else IGNORE_INDEX for t, keep in zip(ids, mask)]


def packed_attention_mask(ids: Sequence[int], eot_id: int, *, per_document: bool = True):
    """The (T, T) boolean attention matrix of a packed sequence: causal, and with ``per_document``
    also block-diagonal so a token sees only its own document (the EOT belongs to the document it
    ends). The label mask decides *which tokens are scored*; this matrix decides *what each token may
    look at* — two different things. Introduced in lesson 04."""
    import numpy as np

    n = len(ids)
    doc = np.zeros(n, dtype=int)
    d = 0
    for i, t in enumerate(ids):
        doc[i] = d
        if t == eot_id:
            d += 1
    causal = np.tril(np.ones((n, n), dtype=bool))
    return causal & (doc[:, None] == doc[None, :]) if per_document else causal


def prefix_lm_attention_mask(n: int, context_len: int):
    """The (n, n) attention matrix of a *prefix-LM*: the first ``context_len`` positions see each other
    in both directions, the rest is causal. A FIM variant that wanted prefix and suffix to attend to
    each other bidirectionally would need this; PSM/SPM do not — after ``<MID>`` the causal mask
    already shows the middle every prefix and suffix token. Introduced in lesson 04."""
    import numpy as np

    if not 0 <= context_len <= n:
        raise ValueError(f"context_len must be in 0..{n}, got {context_len}")
    mask = np.tril(np.ones((n, n), dtype=bool))
    mask[:context_len, :context_len] = True
    return mask


def fim_segments(ids: Sequence[int], prefix_id: int, suffix_id: int, middle_id: int, eot_id: int,
                 pad_id: int | None = None) -> list[str]:
    """Name the part each token of a (packed) sequence belongs to: "sentinel", "prefix", "suffix",
    "middle", "prefix+middle" (after ``<MID>`` in SPM), "plain", "eot" or "pad" — for pictures of FIM
    layouts. Introduced in lesson 04."""
    out, state, spm = [], "plain", False
    for i, t in enumerate(ids):
        if t == eot_id:
            out.append("eot")
            state, spm = "plain", False
        elif pad_id is not None and t == pad_id:
            out.append("pad")
        elif t == prefix_id:
            out.append("sentinel")
            spm = i + 1 < len(ids) and ids[i + 1] == suffix_id
            state = "prefix"
        elif t == suffix_id:
            out.append("sentinel")
            state = "suffix"
        elif t == middle_id:
            out.append("sentinel")
            state = "prefix+middle" if spm else "middle"
        else:
            out.append(state)
    return out


def fim_mode_counts(modes: Sequence[str]) -> dict[str, int]:
    """Count of each FIM mode in a list of modes (plain / psm / spm). Introduced in lesson 04."""
    counts = {"plain": 0, "psm": 0, "spm": 0}
    for m in modes:
        counts[m] = counts.get(m, 0) + 1
    return counts


# --- inference -----------------------------------------------------------------------------------

def trim_context(before: str, after: str, max_prefix_chars: int, max_suffix_chars: int) -> tuple[str, str]:
    """``before`` cut to its last whole lines within ``max_prefix_chars`` and ``after`` to its first whole
    lines within ``max_suffix_chars`` (a single line longer than the limit is cut mid-line). Used by
    :func:`line_infill_tasks` and :mod:`course_lib.training.fim_probe`. Introduced in lesson 04."""
    if len(before) > max_prefix_chars:
        cut = before.find("\n", len(before) - max_prefix_chars)
        before = before[cut + 1:] if cut >= 0 else before[-max_prefix_chars:]
    if len(after) > max_suffix_chars:
        cut = after.rfind("\n", 0, max_suffix_chars)
        after = after[:cut + 1] if cut >= 0 else after[:max_suffix_chars]
    return before, after


def line_infill_tasks(texts: Sequence[str], n: int, seed: int = 0, min_chars: int = 8,
                      max_prefix_chars: int = 500, max_suffix_chars: int = 250
                      ) -> list[tuple[str, str, str]]:
    """Realistic infilling tasks: in each text pick one code line and hide it from its first
    non-blank character to its end (the cursor sits at the indentation, the code around it is
    visible). Prefix and suffix are trimmed to whole lines within ``max_prefix_chars`` /
    ``max_suffix_chars`` so the prompt fits a short context. Returns ``(prefix, middle, suffix)``
    triples. Introduced in lesson 04."""
    r = random.Random(seed)
    tasks = []
    for text in texts:
        if len(tasks) >= n:
            break
        lines = text.splitlines(keepends=True)
        in_string, code_lines = False, []
        for line in lines:  # lines outside triple-quoted strings
            quotes = line.count('"""') + line.count("'''")
            code_lines.append(not in_string and quotes == 0)
            in_string ^= quotes % 2 == 1
        candidates = [i for i, line in enumerate(lines)
                      if len(line.strip()) >= min_chars and not line.lstrip().startswith(("#", '"', "'"))
                      and code_lines[i] and 0 < i < len(lines) - 1]
        if not candidates:
            continue
        i = r.choice(candidates)
        line = lines[i]
        indent = len(line) - len(line.lstrip())
        body = line[indent:].rstrip("\n")
        before, after = trim_context("".join(lines[:i]), "".join(lines[i + 1:]), max_prefix_chars,
                                     max_suffix_chars)
        prefix = before + line[:indent]
        suffix = line[indent + len(body):] + after
        tasks.append((prefix, body, suffix))
    return tasks


def infill(model: Any, tokenizer: Any, prefix: str, suffix: str, *, sentinels: str | FimSentinels =
           "qwen2.5-coder", mode: str = "psm", max_new_tokens: int = 48, stop_at_newline: bool = False
           ) -> str:
    """Ask a FIM-trained causal LM (transformers model + tokenizer) for the middle between ``prefix``
    and ``suffix``: greedy decoding after the FIM prompt until ``<EOT>`` (or a newline).
    Introduced in lesson 04."""
    import torch

    s = get_sentinels(sentinels)
    c = _Codec(tokenizer)
    ids = c.encode(fim_prompt(prefix, suffix, s, mode))
    stop = [c.token_id(s.eot)]
    with torch.no_grad():
        out = model.generate(torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                             max_new_tokens=max_new_tokens, do_sample=False, eos_token_id=stop,
                             pad_token_id=stop[0])
    new = [t for t in out[0, len(ids):].tolist() if t not in stop]
    text = c.decode(new)
    if stop_at_newline:
        text = text.split("\n", 1)[0]
    return text
