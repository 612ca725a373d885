"""The lesson-01 code corpus: repository selection → file filters → secret redaction → a Dataset.

``load_corpus("ci")`` builds it from the Python standard library and the installed distributions
(a few thousand files, well under a minute) and caches it in ``cache_dir("corpus")`` keyed by the
configuration; later lessons call it (or ``load_corpus_report``) instead of reading notebook files.

``load_corpus("ci", language="cpp")`` builds the C/C++ corpus the same way from the C/C++ text on the
machine (the profile's ``cpp_corpus`` section): installed distributions' headers and sources and the
Debian packages of setup's ``g++`` (:func:`course_lib.data.repos.cpp_repos`), selected by licence only,
filtered by :data:`course_lib.data.filters.CPP_CONTENT_RULES`, redacted in comments and literals only.

Introduced in lesson 01.
"""
from __future__ import annotations

import contextlib
import datetime as dt
import json
import platform
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from course_lib import store
from course_lib.data.clike import cpp_file_kind, normalize_language
from course_lib.data.filters import FilterReport, content_rules, file_filter_reason, language_of, read_source_file
from course_lib.data.redaction import redact_secrets
from course_lib.data.repos import STDLIB_REPO, Repo, Selection, select_repos
from course_lib.paths import cache_dir, display_path
from course_lib.profiles import Profile, ProfileLike, resolve_profile

CORPUS_FORMAT = 1  # bump when the rules or columns change: the cache key changes with it
COLUMNS = ("repo", "path", "license", "language", "content", "size", "kept_reason")


@dataclass
class CorpusReport:
    """What happened while building the corpus: repositories kept/rejected, files removed per rule,
    secrets redacted per kind. Introduced in lesson 01."""

    profile: str
    repos_seen: int = 0
    repos_kept: int = 0
    repo_rejections: dict[str, str] = field(default_factory=dict)   # repo -> reason
    files: FilterReport = field(default_factory=FilterReport)
    files_capped: int = 0           # candidate files beyond max_files_per_repo (not read)
    redactions: Counter = field(default_factory=Counter)
    files_redacted: int = 0
    redaction_examples: list[dict] = field(default_factory=list)
    seconds: float = 0.0
    config: dict = field(default_factory=dict)
    kept_repos: dict[str, dict] = field(default_factory=dict)  # repo -> version, licence, stars, pushed_at
    language: str = "python"
    file_kinds: Counter = field(default_factory=Counter)  # C/C++: kept headers / sources

    def to_dict(self) -> dict:
        return {"profile": self.profile, "repos_seen": self.repos_seen, "repos_kept": self.repos_kept,
                "repo_rejections": self.repo_rejections, "files": self.files.to_dict(),
                "files_capped": self.files_capped, "redactions": dict(self.redactions),
                "files_redacted": self.files_redacted, "redaction_examples": self.redaction_examples,
                "seconds": self.seconds, "config": self.config, "kept_repos": self.kept_repos,
                "language": self.language, "file_kinds": dict(self.file_kinds)}

    @classmethod
    def from_dict(cls, d: dict) -> "CorpusReport":
        return cls(profile=d["profile"], repos_seen=d["repos_seen"], repos_kept=d["repos_kept"],
                   repo_rejections=d["repo_rejections"], files=FilterReport.from_dict(d["files"]),
                   files_capped=d["files_capped"], redactions=Counter(d["redactions"]),
                   files_redacted=d["files_redacted"], redaction_examples=d["redaction_examples"],
                   seconds=d["seconds"], config=d["config"], kept_repos=d.get("kept_repos", {}),
                   language=d.get("language", "python"), file_kinds=Counter(d.get("file_kinds", {})))

    def summary(self) -> str:
        reasons = Counter(r.split(":")[0] for r in self.repo_rejections.values())
        lines = [f"corpus ({self.profile}): {self.repos_kept}/{self.repos_seen} repositories kept "
                 f"(rejected: {dict(reasons)}), {self.files_capped:,} files over the per-repo cap not read",
                 self.files.summary(),
                 f"redacted {sum(self.redactions.values()):,} secrets/PII in {self.files_redacted:,} files: "
                 f"{dict(self.redactions)}",
                 f"built in {self.seconds:.1f} s"]
        if self.file_kinds:
            lines.insert(2, "kept C/C++ files: " + ", ".join(f"{n:,} {k}s" for k, n in sorted(self.file_kinds.items())))
        return "\n".join(lines)


def _kept_reason(repo: Repo, cfg, n_rules: int, redacted: Counter) -> str:
    parts = [f"licence {repo.license}"]
    if repo.stars is not None:
        parts.append(f"{repo.stars} stars > {cfg['min_stars']}")
    if repo.pushed_at is not None:
        parts.append(f"pushed {repo.pushed_at.isoformat()}")
    if repo.source == "system":
        parts.append(f"Debian package {repo.version}")
    parts.append(f"passed {n_rules} file filters")
    if redacted:
        parts.append("redacted " + ", ".join(f"{k}×{v}" for k, v in sorted(redacted.items())))
    return "; ".join(parts)


def _add_redaction_examples(report: CorpusReport, shown: str, text: str, result, per_kind: int = 5) -> None:
    """Keep up to ``per_kind`` examples of each finding kind: the file, the line and the line as redacted
    (never the secret itself)."""
    have = Counter(e["kind"] for e in report.redaction_examples)
    redacted_lines = result.text.splitlines()
    for f in result.findings:
        if have[f.kind] < per_kind:
            line = text.count("\n", 0, f.start) + 1
            report.redaction_examples.append({
                "file": shown, "line": line, "kind": f.kind,
                "redacted_line": redacted_lines[line - 1][:160] if line - 1 < len(redacted_lines) else ""})
            have[f.kind] += 1


def cpp_language_of(path: str) -> str:
    """The ``language`` column of a C/C++ corpus row: ``C`` (``.c``), ``C/C++`` (``.h``: either),
    ``CUDA`` (``.cu``, ``.cuh``), else ``C++``. Introduced in lesson 01."""
    ext = Path(str(path)).suffix.lower()
    return {".c": "C", ".h": "C/C++", ".cu": "CUDA", ".cuh": "CUDA"}.get(ext, "C++")


def build_corpus_rows(repos: Iterable[Repo], cfg, report: CorpusReport, *,
                      progress: bool = True, language: str = "python") -> dict[str, list]:
    """Read, filter and redact the files of already-selected ``repos``; count everything in ``report``.
    Returns the dataset columns. Never raises on a bad file: it is counted under a named reason.
    ``language="cpp"`` filters with the C/C++ rules, redacts comments and literals only, counts kept
    headers and sources in ``report.file_kinds`` and stops reading once ``cfg["max_total_bytes"]``
    bytes are kept (the files not read are counted in ``report.files_capped``).

    Introduced in lesson 01.
    """
    from tqdm import tqdm  # a text bar: a saved notebook shows its last state (a widget bar saves "0%")

    language = normalize_language(language)
    n_rules = len(content_rules(language))
    cols: dict[str, list] = {c: [] for c in COLUMNS}
    repos = list(repos)
    max_bytes = int(cfg["max_file_bytes"])
    budget = cfg.get("max_total_bytes")
    kept_bytes = 0
    bar = tqdm(repos, desc="repos", unit="repo", disable=not progress, mininterval=1.0)
    for repo in bar:
        cap = int(cfg["stdlib_max_files"] if repo.name == STDLIB_REPO and cfg.get("stdlib_max_files")
                  else cfg["max_files_per_repo"])
        report.files_capped += max(0, len(repo.files) - cap)
        for k, rel in enumerate(repo.files[:cap]):
            if budget is not None and kept_bytes >= int(budget):
                report.files_capped += len(repo.files[:cap]) - k
                break
            shown = f"{repo.name}:{rel}"
            text, reason = read_source_file(Path(repo.root) / rel, max_bytes=max_bytes)
            if reason is None:
                try:
                    reason = file_filter_reason(rel, text, max_bytes=max_bytes, language=language)
                except Exception as exc:  # a rule must never stop the build
                    reason = f"filter_error:{type(exc).__name__}"
            report.files.add(shown, reason)
            if reason is not None:
                continue
            redacted = Counter()
            if cfg.get("redact", True):
                result = redact_secrets(text, language=language)
                if result.findings:
                    redacted = result.counts()
                    report.redactions.update(redacted)
                    report.files_redacted += 1
                    _add_redaction_examples(report, shown, text, result)
                    text = result.text
            cols["repo"].append(repo.name)
            cols["path"].append(rel)
            cols["license"].append(repo.license or "")
            cols["language"].append(cpp_language_of(rel) if language == "cpp" else language_of(rel) or "unknown")
            cols["content"].append(text)
            cols["size"].append(len(text.encode("utf-8")))
            kept_bytes += cols["size"][-1]
            cols["kept_reason"].append(_kept_reason(repo, cfg, n_rules, redacted))
            if language == "cpp":
                report.file_kinds[cpp_file_kind(rel) or "other"] += 1
        bar.set_postfix(kept=report.files.kept, dropped=report.files.seen - report.files.kept)
    return cols


def _as_of(cfg) -> dt.date:
    value = cfg.get("metadata_as_of")
    return dt.date.fromisoformat(value) if value else dt.date.today()


def _corpus_section(P: Profile, language: str):
    return P.cpp_corpus if normalize_language(language) == "cpp" else P.corpus


def select_corpus_repos(profile: ProfileLike = "ci", language: str = "python") -> tuple[list[Repo], Selection]:
    """All candidate repositories of ``profile`` and the selection made from them.

    ci: the standard library + installed distributions with the illustrative metadata table;
    full: GitHub search results (needs the network and ``GITHUB_TOKEN``). ``language="cpp"``: the
    C/C++ text on this machine (:func:`course_lib.data.repos.cpp_repos`) selected by licence
    (:func:`course_lib.data.repos.select_cpp_repos`). Introduced in lesson 01.
    """
    P = resolve_profile(profile)
    if normalize_language(language) == "cpp":
        from course_lib.data.repos import cpp_repos, select_cpp_repos

        cfg = P.cpp_corpus
        if cfg["source"] != "local":
            raise ValueError(f"profile {P.name!r}: cpp_corpus.source {cfg['source']!r} is not supported "
                             f"(only 'local': the C/C++ text installed on this machine)")
        repos = cpp_repos(system=bool(cfg.get("system_packages", True)))
        return repos, select_cpp_repos(repos, max_repos=cfg["max_repos"])
    cfg = P.corpus
    if cfg["source"] == "site-packages":
        from course_lib.data.repos import local_repos

        repos = local_repos()
        if not cfg.get("stdlib_max_files", 1):
            repos = [r for r in repos if r.name != STDLIB_REPO]
    elif cfg["source"] == "github":
        from course_lib.data.github import GitHubClient, search_repos

        client = GitHubClient.from_env()
        repos = search_repos(client, cfg.get("github_query", "language:python"),
                             min_stars=cfg["min_stars"], pushed_within_months=cfg["active_within_months"],
                             max_repos=cfg["max_repos"])
    else:
        raise ValueError(f"profile {P.name!r}: unknown corpus source {cfg['source']!r} "
                         f"(expected 'site-packages' or 'github')")
    sel = select_repos(repos, min_stars=cfg["min_stars"], active_within_months=cfg["active_within_months"],
                       as_of=_as_of(cfg), max_repos=cfg["max_repos"])
    return repos, sel


def _code_files(language: str = "python") -> list[Path]:
    """The modules that decide what enters the corpus: editing a rule rebuilds the cache (the C/C++
    corpus also depends on the lexer)."""
    mods = ("filters", "redaction", "repos", "corpus") + (("clike",) if normalize_language(language) == "cpp" else ())
    return [Path(__file__).parent / f"{mod}.py" for mod in mods]


def _corpus_config(P: Profile, cfg, repos: list[Repo], language: str = "python") -> dict:
    config = {
        "format": CORPUS_FORMAT, "profile": P.name, "config": dict(cfg), "python": platform.python_version(),
        "repos": [(r.name, r.version, r.license, r.stars, str(r.pushed_at), len(r.files)) for r in repos],
    }
    if normalize_language(language) != "python":   # the Python corpus keeps its key
        config["language"] = normalize_language(language)
    return config


def _artefact_name(P: Profile, language: str) -> str:
    lang = normalize_language(language)
    return P.name if lang == "python" else f"{P.name}-{lang}"


def corpus_path(profile: ProfileLike = "ci", *, selected=None, language: str = "python") -> Path:
    """The cache folder of the corpus for ``profile`` as it would be built now (its name holds the
    artefact key: configuration, selected repositories, code version). Introduced in lesson 01."""
    P = resolve_profile(profile)
    cfg = _corpus_section(P, language)
    repos, _ = selected if selected is not None else select_corpus_repos(P, language)
    return store.artefact_path("corpus", _artefact_name(P, language), _corpus_config(P, cfg, repos, language),
                               code=_code_files(language))


def build_corpus(profile: ProfileLike = "ci", *, progress: bool = True, selected=None, language: str = "python"):
    """Build the corpus of ``profile`` without the cache: ``(datasets.Dataset, CorpusReport)``.
    ``selected`` reuses a ``select_corpus_repos(profile, language)`` result; ``language="cpp"`` builds
    the C/C++ corpus (profile section ``cpp_corpus``).

    Introduced in lesson 01.
    """
    import datasets

    P = resolve_profile(profile)
    start = time.perf_counter()
    language = normalize_language(language)
    cfg = _corpus_section(P, language)
    repos, sel = selected if selected is not None else select_corpus_repos(P, language)
    if cfg["source"] == "github":
        from course_lib.data.github import GitHubClient, download_repos

        sel.kept = download_repos(GitHubClient.from_env(), sel.kept, cache_dir("corpus", "github"))
    report = CorpusReport(profile=P.name, repos_seen=len(repos), repos_kept=len(sel.kept),
                          repo_rejections={r.name: why for r, why in sel.rejected},
                          config={k: cfg[k] for k in cfg},
                          kept_repos={r.name: {"version": r.version, "license": r.license, "stars": r.stars,
                                               "pushed_at": r.pushed_at.isoformat() if r.pushed_at else None,
                                               "source": r.source, "metadata_note": r.metadata_note}
                                      for r in sel.kept}, language=language)
    cols = build_corpus_rows(sel.kept, cfg, report, progress=progress, language=language)
    features = datasets.Features({c: datasets.Value("int64" if c == "size" else "string") for c in COLUMNS})
    ds = datasets.Dataset.from_dict(cols, features=features)
    report.seconds = time.perf_counter() - start
    return ds, report


def load_corpus(profile: ProfileLike = "ci", rebuild: bool = False, language: str = "python"):
    """The lesson-01 corpus as a ``datasets.Dataset`` with columns repo, path, license, language,
    content, size, kept_reason — built by repository selection, file filters and secret redaction,
    cached in ``cache_dir("corpus")`` through :mod:`course_lib.store` (keyed by the configuration, the
    selected repositories and the code; atomic). ``rebuild=True`` builds it again. The build report is
    in ``load_corpus_report(profile)``. ``language="cpp"`` gives the C/C++ corpus (same columns; the
    ``cpp_corpus`` profile section; cached apart): see :func:`select_corpus_repos` and
    :func:`build_corpus_rows`.

    Introduced in lesson 01.
    """
    import datasets

    P = resolve_profile(profile)
    language = normalize_language(language)
    selected = select_corpus_repos(P, language)
    cfg = _corpus_section(P, language)

    def build(folder: Path) -> dict:
        extra = {} if language == "python" else {"language": language}
        ds, report = build_corpus(P, selected=selected, **extra)
        with quiet_datasets():
            ds.save_to_disk(str(folder / "dataset"))
        (folder / "report.json").write_text(json.dumps(report.to_dict(), indent=1, default=str), encoding="utf-8")
        print(report.summary())
        return {"rows": len(ds)}

    art = store.get_or_build("corpus", _artefact_name(P, language), _corpus_config(P, cfg, selected[0], language), build,
                             code=_code_files(language), rebuild=rebuild, log=print)
    if art.built:
        print(f"saved to {display_path(art.path)}")
    return datasets.load_from_disk(str(art.path / "dataset"))


@contextlib.contextmanager
def quiet_datasets():
    """Hugging Face ``datasets`` without its progress bars inside the block (a notebook keeps the last frame of
    a bar in its saved output, half-drawn); as they were afterwards. The course's builders save with it.
    Introduced in lesson 01."""
    import datasets

    was_on = datasets.is_progress_bar_enabled()
    datasets.disable_progress_bars()
    try:
        yield
    finally:
        if was_on:
            datasets.enable_progress_bars()


def corpus_repo_metadata(profile: ProfileLike = "ci") -> dict[str, dict]:
    """Per kept repository: version, licence, stars, pushed_at, source (e.g. for lesson 02's "keep the
    copy from the repository with most stars"). In ci the stars are illustrative. Introduced in lesson 01."""
    P = resolve_profile(profile)
    return load_corpus_report(P).kept_repos


def load_corpus_report(profile: ProfileLike = "ci", language: str = "python") -> CorpusReport:
    """The build report of the cached corpus (builds the corpus first when missing). Introduced in
    lesson 01."""
    P = resolve_profile(profile)
    target = corpus_path(P, language=language)
    if not store.is_complete(target):
        load_corpus(P, language=language)
    return CorpusReport.from_dict(json.loads((target / "report.json").read_text(encoding="utf-8")))
