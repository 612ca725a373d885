"""What the tiny model is pretrained on: the corpus of lessons 01-03, cut into documents and snippets.

:func:`corpus_repositories` is the one loader of lesson 03's ordered corpus (repositories, files in
dependency order, fingerprint); :func:`pretraining_corpus` splits it into training and held-out
repositories (:func:`is_held_out`) and cuts the text into snippets with docstrings and comments kept
or stripped (:func:`strip_docstrings_and_comments`, :func:`split_into_snippets`).

Introduced in lesson 04.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any, Sequence

from course_lib.profiles import ProfileLike, resolve_profile
from course_lib.training.tinymodel.tokenizer import QWEN_FIM


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
            parts.append(f"{QWEN_FIM[5]}{self.paths[i]}\n{head_of(self.texts[i], file_chars).rstrip(chr(10))}\n")
        return head_of("".join(parts), max_chars)


def head_of(text: str, max_chars: int | None) -> str:
    """The first ``max_chars`` characters of ``text``, cut back to the last line end (whole text when
    it is short enough or ``max_chars`` is None)."""
    if max_chars is None or len(text) <= max_chars:
        return text
    cut = text.rfind("\n", 0, max_chars) + 1
    return text[:cut] if cut > 0 else text[:max_chars]


def corpus_repositories(profile: ProfileLike = "ci") -> tuple[list[RepoFiles], str]:
    """The course corpus as lessons 01-03 leave it — licensed, filtered, redacted, deduplicated, one
    entry per repository with its files in dependency order (``deps.load_ordered_corpus``, which
    builds lessons 01-03's artefacts when they are not cached; the file contents come from
    ``dedup.load_deduped_corpus``) — and its fingerprint (a hash of every repository's sample). The one
    loader through which lessons 04 and 05 read the corpus. Introduced in lesson 04."""
    from course_lib.data.dedup import load_deduped_corpus
    from course_lib.data.deps import load_ordered_corpus

    P = resolve_profile(profile)
    ordered = load_ordered_corpus(P)
    deduped = load_deduped_corpus(P)
    key = (P.name, *(f["filename"] for f in ordered.cache_files + deduped.cache_files))
    if key not in _REPOSITORIES:
        _REPOSITORIES.clear()
        _REPOSITORIES[key] = _read_repositories(P, ordered, deduped)
    return _REPOSITORIES[key]


_REPOSITORIES: dict[tuple, tuple[list[RepoFiles], str]] = {}  # the last corpus read in this process


def _read_repositories(profile: ProfileLike, ordered, deduped) -> tuple[list[RepoFiles], str]:
    P = resolve_profile(profile)
    content = {(r, p): t for r, p, t in zip(deduped["repo"], deduped["path"], deduped["content"])}
    digest = hashlib.sha256()
    repos = []
    for name, paths, text in zip(ordered["repo"], ordered["paths"], ordered["text"]):
        digest.update(name.encode() + b"\0" + text.encode("utf-8", "surrogatepass") + b"\0")
        missing = [p for p in paths if (name, p) not in content]
        if missing:
            raise RuntimeError(f"ordered corpus repository {name!r}: {len(missing)} files are not in the "
                               f"deduplicated corpus (e.g. {missing[0]!r}); the two caches disagree — "
                               f"rebuild with deps.load_ordered_corpus({P.name!r}, rebuild=True)")
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


def pretraining_corpus(profile: ProfileLike = "ci") -> PretrainingCorpus:
    """What the tiny model of ``profile`` is trained and evaluated on: :func:`corpus_repositories`,
    repositories held out by :func:`is_held_out`, and of each repository the Python files in dependency
    order, docstrings and comments removed (:func:`strip_docstrings_and_comments`), up to the profile's
    ``repo_chars`` characters. ``info`` counts repositories, files and characters and holds the
    corpus fingerprint. Introduced in lesson 04."""
    P = resolve_profile(profile)
    S = P.tiny_model
    repos, fingerprint = corpus_repositories(P)
    key = (P.name, fingerprint, json.dumps(dict(S), sort_keys=True))
    if key not in _PRETRAINING:
        _PRETRAINING.clear()
        _PRETRAINING[key] = _select_pretraining_text(repos, fingerprint, S, P)
    return _PRETRAINING[key]


_PRETRAINING: dict[tuple, PretrainingCorpus] = {}


def _select_pretraining_text(repos: list[RepoFiles], fingerprint: str, S, profile: ProfileLike
                             ) -> PretrainingCorpus:
    P = resolve_profile(profile)
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
        raise RuntimeError(f"the corpus of profile {P.name!r} gives {len(train)} training and "
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
