"""Repository selection: which repositories may enter the corpus (stars, permissive licence, activity).

In the ``ci`` profile the "repositories" are the Python standard library and the distributions
installed in the course's own environment: real code with real licence metadata (``License-Expression``,
trove classifiers, ``License`` fields, licence files). Stars and last-push dates cannot be measured
offline, so they come from ``assets/repo_metadata.csv`` — ILLUSTRATIVE course data generated for the
lesson, not GitHub facts. In the ``full`` profile the same selection runs on GitHub search results
(:mod:`course_lib.data.github`).

Introduced in lesson 01.
"""
from __future__ import annotations

import csv
import datetime as dt
import functools
import importlib.metadata as md
import os
import re
import sysconfig
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Iterable

from course_lib.data.filters import language_of, license_verdict, normalize_license
from course_lib.paths import assets_dir
from course_lib.store import atomic_write_text

STDLIB_REPO = "python/cpython"
# The course's own package is not third-party code: it never enters its own corpus.
EXCLUDED_DISTRIBUTIONS = frozenset({"course-lib"})
METADATA_FILE = "repo_metadata.csv"


@dataclass(frozen=True)
class Repo:
    """One repository: where its files are, its licence and (illustrative or real) popularity."""

    name: str
    version: str
    license_raw: str | None       # what the metadata said
    license: str | None           # SPDX id, None when unknown
    license_source: str | None    # License-Expression / classifier / License field / licence file
    root: str                     # folder the file paths are relative to
    files: tuple[str, ...] = ()   # candidate code files, relative to root
    stars: int | None = None
    pushed_at: dt.date | None = None
    source: str = "site-packages"  # stdlib / site-packages / github
    metadata_note: str = ""        # e.g. "illustrative" for the ci metadata table


def canonical_name(name: str) -> str:
    """PEP 503 normalised distribution name (``Foo_Bar`` → ``foo-bar``). Introduced in lesson 01."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _license_of_distribution(dist: md.Distribution) -> tuple[str | None, str | None, str | None]:
    """``(raw, spdx, source)`` from License-Expression, classifiers, the License field, licence files."""
    meta = dist.metadata
    expr = meta.get("License-Expression")
    if expr:
        return expr, normalize_license(expr), "License-Expression"
    classifiers = [c for c in (meta.get_all("Classifier") or []) if c.startswith("License ::")]
    spdx_ids = [normalize_license(c) for c in classifiers]
    spdx_ids = [s for s in spdx_ids if s]
    if spdx_ids:
        permissive = [s for s in spdx_ids if license_verdict(s)[0]]
        return "; ".join(classifiers), (permissive or spdx_ids)[0], "classifier"
    field_text = meta.get("License")
    if field_text and field_text.strip() and field_text.strip().upper() not in ("UNKNOWN", "NONE"):
        spdx = normalize_license(field_text)
        if spdx:
            return field_text.strip()[:200], spdx, "License field"
    for f in dist.files or []:
        name = f.name.upper()
        if ".dist-info" in str(f) and name.startswith(("LICENSE", "LICENCE", "COPYING")):
            try:
                text = Path(f.locate()).read_bytes().decode("utf-8", "replace")
            except OSError:
                continue
            spdx = normalize_license(text[:3000])
            if spdx:
                return f"{f.name} (text)", spdx, "licence file"
    if classifiers or field_text:
        return "; ".join(classifiers) or (field_text or "")[:200], None, "unrecognised"
    return None, None, None


def code_files(paths: Iterable[str]) -> tuple[str, ...]:
    """The code files among ``paths`` (known language extension, no metadata or bytecode folders),
    shallow files first. Introduced in lesson 01."""
    keep = []
    for p in paths:
        if p.startswith("..") or ".dist-info/" in p or ".egg-info/" in p or "__pycache__" in p:
            continue
        if language_of(p):
            keep.append(p)
    # shallow files first (a package's top-level modules, which import each other), then by path
    return tuple(sorted(set(keep), key=lambda p: (p.count("/"), p)))


SKIP_DIRS = frozenset({"site-packages", "dist-packages", "__pycache__"})
"""Folders :func:`source_files` never enters (installed third-party code and bytecode caches)."""


def source_files(root: str | os.PathLike, *, skip_dirs: Iterable[str] = SKIP_DIRS) -> list[str]:
    """Every file below ``root`` as a ``/``-separated path relative to ``root``, sorted,
    without entering folders named in ``skip_dirs`` or starting with ``config-`` (the interpreter's
    build configuration). The course's one source-tree walker. Introduced in lesson 01."""
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(f"{root}: not a folder; source_files walks a source tree")
    skip = frozenset(skip_dirs)
    files = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in skip and not d.startswith("config-"))
        rel = os.path.relpath(dirpath, root).replace(os.sep, "/")
        files.extend(fn if rel == "." else f"{rel}/{fn}" for fn in filenames)
    return sorted(files)


def stdlib_repo() -> Repo:
    """The Python standard library as one repository (``python/cpython``, PSF-2.0). Introduced in
    lesson 01."""
    import platform

    root = Path(sysconfig.get_paths()["stdlib"])
    return Repo(STDLIB_REPO, platform.python_version(), "PSF-2.0", "PSF-2.0", "CPython LICENSE",
                str(root), code_files(source_files(root)), source="stdlib")


def installed_repos() -> list[Repo]:
    """One :class:`Repo` per installed distribution (name, version, licence, code files), sorted by name.

    Introduced in lesson 01.
    """
    seen: dict[str, Repo] = {}
    for dist in md.distributions():
        try:
            name = dist.metadata.get("Name")
            if not name or canonical_name(name) in seen or canonical_name(name) in EXCLUDED_DISTRIBUTIONS:
                continue
            raw, spdx, source = _license_of_distribution(dist)
            files = code_files(str(f).replace(os.sep, "/") for f in (dist.files or []))
            root = str(dist.locate_file(""))
            seen[canonical_name(name)] = Repo(canonical_name(name), dist.version or "", raw, spdx, source,
                                              root, files, source="site-packages")
        except Exception as exc:  # a broken METADATA must not stop the lesson
            print(f"skipping an unreadable distribution ({dist!r}): {exc}")
    return [seen[k] for k in sorted(seen)]


def load_repo_metadata(path: str | os.PathLike | None = None) -> dict[str, dict]:
    """Stars and last-push dates per repository from a CSV (default ``assets/repo_metadata.csv``,
    illustrative course data). Lines starting with ``#`` are comments. Introduced in lesson 01."""
    path = Path(path) if path else assets_dir(METADATA_FILE)
    rows = {}
    with open(path, encoding="utf-8") as fh:
        reader = csv.DictReader(line for line in fh if not line.startswith("#"))
        for i, row in enumerate(reader, 2):
            try:
                rows[row["repo"]] = {
                    "stars": int(row["stars"]),
                    "pushed_at": dt.date.fromisoformat(row["pushed_at"]),
                    "note": row.get("note", ""),
                }
            except (KeyError, ValueError) as exc:
                raise ValueError(f"{path}: row {i} is malformed ({exc}); expected columns "
                                 f"repo,stars,pushed_at,note") from None
    return rows


def metadata_as_of(path: str | os.PathLike | None = None) -> dt.date:
    """The snapshot date written in the metadata file's ``# as_of: YYYY-MM-DD`` comment."""
    path = Path(path) if path else assets_dir(METADATA_FILE)
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            m = re.match(r"#\s*as_of:\s*(\d{4}-\d\d-\d\d)", line)
            if m:
                return dt.date.fromisoformat(m.group(1))
    return dt.date.today()


def with_metadata(repos: Iterable[Repo], metadata: dict[str, dict]) -> list[Repo]:
    """Attach stars/pushed_at from ``metadata`` (repos without an entry keep None)."""
    out = []
    for r in repos:
        m = metadata.get(r.name)
        out.append(replace(r, stars=m["stars"], pushed_at=m["pushed_at"], metadata_note=m["note"]) if m else r)
    return out


def local_repos(metadata_path: str | os.PathLike | None = None) -> list[Repo]:
    """The ci repository table: the standard library + installed distributions, with the illustrative
    stars/activity metadata attached. Introduced in lesson 01."""
    return with_metadata(list(_scanned_repos(_environment_stamp())), load_repo_metadata(metadata_path))


def _environment_stamp() -> tuple:
    """Changes when distributions are installed or removed (the mtimes of the site folders)."""
    import site
    import sys

    stamp = []
    for folder in {*sys.path, *site.getsitepackages()}:
        try:
            stamp.append((folder, os.stat(folder).st_mtime_ns))
        except OSError:
            continue
    return tuple(sorted(stamp))


@functools.lru_cache(maxsize=2)
def _scanned_repos(stamp: tuple) -> tuple[Repo, ...]:
    """Scanning every distribution's RECORD takes seconds: done once per environment state."""
    return (stdlib_repo(), *installed_repos())


def months_between(earlier: dt.date, later: dt.date) -> float:
    return (later - earlier).days / 30.44


@dataclass
class Selection:
    """The outcome of :func:`select_repos`: kept repositories and, for each rejected one, why."""

    kept: list[Repo] = field(default_factory=list)
    rejected: list[tuple[Repo, str]] = field(default_factory=list)

    def reasons(self) -> dict[str, int]:
        from collections import Counter

        return dict(Counter(reason.split(":")[0] for _, reason in self.rejected))


def repo_rejection_reason(repo: Repo, *, min_stars: int, active_within_months: float,
                          as_of: dt.date) -> str | None:
    """None when ``repo`` passes; else the first failing criterion: licence (copyleft / unknown /
    missing), stars (must be > ``min_stars``), activity (pushed within ``active_within_months``).

    Introduced in lesson 01.
    """
    allowed, why = license_verdict(repo.license or repo.license_raw)
    if not allowed:
        return f"licence: {why}"
    if repo.stars is None or repo.pushed_at is None:
        return "no metadata: stars/last push unknown"
    if repo.stars <= min_stars:
        return f"stars: {repo.stars} <= {min_stars}"
    age = months_between(repo.pushed_at, as_of)
    if age > active_within_months:
        return f"inactive: last push {repo.pushed_at.isoformat()} ({age:.0f} months before {as_of.isoformat()})"
    return None


def select_repos(repos: Iterable[Repo], *, min_stars: int = 5, active_within_months: float = 36,
                 as_of: dt.date | None = None, max_repos: int | None = None) -> Selection:
    """Keep repositories with a permissive licence, more than ``min_stars`` stars and a push within
    ``active_within_months`` of ``as_of``; at most ``max_repos`` (most stars first, then name).

    Introduced in lesson 01.
    """
    as_of = as_of or dt.date.today()
    sel = Selection()
    for r in repos:
        reason = repo_rejection_reason(r, min_stars=min_stars, active_within_months=active_within_months,
                                       as_of=as_of)
        if reason is None:
            sel.kept.append(r)
        else:
            sel.rejected.append((r, reason))
    if max_repos is not None and len(sel.kept) > max_repos:
        sel.kept.sort(key=lambda r: (-(r.stars or 0), r.name))
        for r in sel.kept[max_repos:]:
            sel.rejected.append((r, f"over max_repos: {max_repos}"))
        sel.kept = sel.kept[:max_repos]
    sel.kept.sort(key=lambda r: r.name)
    return sel


def repo_table(repos: Iterable[Repo], selection: Selection | None = None):
    """A pandas DataFrame of repositories (one row each) with the selection verdict if given."""
    import pandas as pd

    verdict = {}
    if selection is not None:
        verdict.update({r.name: "kept" for r in selection.kept})
        verdict.update({r.name: why for r, why in selection.rejected})
    rows = [{
        "repo": r.name, "version": r.version, "license": r.license, "license_source": r.license_source,
        "license_raw": (r.license_raw or "")[:60], "stars": r.stars,
        "pushed_at": r.pushed_at.isoformat() if r.pushed_at else None, "code_files": len(r.files),
        "source": r.source, "verdict": verdict.get(r.name, ""),
    } for r in repos]
    return pd.DataFrame(rows)


def illustrative_metadata(name: str, as_of: dt.date) -> tuple[int, dt.date]:
    """ILLUSTRATIVE ``(stars, pushed_at)`` for ``name``, derived from a hash of the name — course data,
    not a GitHub measurement. About 8% get ≤ 5 stars and about 10% a last push more than 36 months
    before ``as_of``, so the selection rules have something to remove. Introduced in lesson 01."""
    import hashlib
    import math

    h = int(hashlib.sha256(name.encode()).hexdigest(), 16)
    u1, u2, u3 = (h % 1000) / 1000, (h // 1000 % 1000) / 1000, (h // 10**6 % 1000) / 1000
    if u2 < 0.08:
        stars = int(u1 * 6)
    else:
        stars = int(math.exp(math.log(6) + u1 * (math.log(60000) - math.log(6))))
    months = 37 + u3 * 40 if (h // 10**9 % 100) < 10 else u3 * 24
    return stars, as_of - dt.timedelta(days=int(months * 30.44))


def write_illustrative_metadata(path: str | os.PathLike, names: Iterable[str], as_of: dt.date) -> Path:
    """Write the ci metadata table (``assets/repo_metadata.csv``) for ``names`` with
    :func:`illustrative_metadata` values, clearly labelled as illustrative. Introduced in lesson 01."""
    path = Path(path)
    lines = [
        "# ILLUSTRATIVE COURSE DATA — not measured GitHub facts.\n",
        "# Stars and last-push dates cannot be fetched offline; these values come from a hash of each name\n",
        "# (course_lib.data.repos.write_illustrative_metadata) so that the selection rules of lesson 01 have\n",
        "# something to act on. Some repositories get few stars or an old last push on purpose.\n",
        f"# as_of: {as_of.isoformat()}\n",
        "repo,stars,pushed_at,note\n",
    ]
    for n in sorted(set(names)):
        stars, pushed = illustrative_metadata(n, as_of)
        lines.append(f"{n},{stars},{pushed.isoformat()},illustrative\n")
    return atomic_write_text(path, "".join(lines))


# --- C/C++ sources on this machine (the C/C++ corpus of lessons 01-03) ------------------------------------
# Two kinds of "repository": installed Python distributions that ship C/C++ headers or sources (pinned in
# scripts/constraints.txt, torch pinned by setup: the same on every student machine), and the Debian
# packages that setup's g++ brings (its dependency closure: libstdc++, glibc, Linux UAPI headers ...).
# Everything else under /usr/include depends on what else a machine has installed and is left out.
# Licences of the Debian packages, read from /usr/share/doc/<package>/copyright (Debian 12, 2026-12):
SYSTEM_CPP_PACKAGES: tuple[tuple[str, str, str], ...] = (
    (r"libstdc\+\+-\d+-dev", "GPL-3.0-or-later WITH GCC-exception-3.1", "the C++ standard library headers"),
    (r"libgcc-\d+-dev", "GPL-3.0-or-later WITH GCC-exception-3.1", "GCC's own headers (stddef.h, intrinsics)"),
    (r"libc6-dev", "LGPL-2.1-or-later", "the C library headers (glibc)"),
    (r"linux-libc-dev", "GPL-2.0-only WITH Linux-syscall-note", "the Linux kernel's user-space API headers"),
    (r"libcrypt-dev", "LGPL-2.1-or-later", "libxcrypt's crypt.h"),
    (r"libnsl-dev", "LGPL-2.1-or-later", "NIS headers"),
    (r"libtirpc-dev", "BSD-3-Clause", "Sun RPC headers"),
)
DPKG_INFO = Path("/var/lib/dpkg/info")


def _dpkg_versions() -> dict[str, str]:
    """``{package: version}`` of the installed Debian packages (empty without dpkg)."""
    versions, name = {}, None
    try:
        with open("/var/lib/dpkg/status", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.startswith("Package: "):
                    name = line.split(":", 1)[1].strip()
                elif line.startswith("Version: ") and name:
                    versions[name] = line.split(":", 1)[1].strip()
    except OSError:
        return {}
    return versions


def system_cpp_repos(info_dir: str | os.PathLike = DPKG_INFO) -> list[Repo]:
    """One :class:`Repo` per installed Debian package of :data:`SYSTEM_CPP_PACKAGES` (the C/C++ headers
    that setup's ``g++`` brings), files relative to ``/`` (``usr/include/stdio.h``), licence from the
    table. Empty (with a printed reason) where there is no dpkg database. Introduced in lesson 01."""
    from course_lib.data.clike import is_cpp_file

    info = Path(info_dir)
    if not info.is_dir():
        print(f"no dpkg database at {info}: no system C/C++ packages (Debian/Ubuntu only)")
        return []
    versions = _dpkg_versions()
    repos = []
    for lst in sorted(info.glob("*.list")):
        pkg = lst.stem.split(":")[0]
        match = next(((lic, what) for pat, lic, what in SYSTEM_CPP_PACKAGES if re.fullmatch(pat, pkg)), None)
        if match is None:
            continue
        files = []
        for line in lst.read_text(encoding="utf-8", errors="replace").splitlines():
            p = line.strip()
            if p.startswith("/") and is_cpp_file(p) and os.path.isfile(p) and not os.path.islink(p):
                files.append(p.lstrip("/"))
        if files:
            files = sorted(set(files), key=lambda p: (p.count("/"), p))
            repos.append(Repo(f"debian/{pkg}", versions.get(pkg, ""), match[0], normalize_license(match[0]),
                              f"Debian copyright file ({match[1]})", "/", tuple(files), source="system"))
    return repos


def installed_cpp_repos() -> list[Repo]:
    """One :class:`Repo` per installed distribution that ships C/C++ headers or sources (files from
    its RECORD, shallow first; licence as :func:`installed_repos` reads it), sorted by name.
    Introduced in lesson 01."""
    from course_lib.data.clike import is_cpp_file

    out = []
    for r in installed_repos():
        try:
            dist = md.distribution(r.name)
        except md.PackageNotFoundError:
            continue
        files = [str(f).replace(os.sep, "/") for f in (dist.files or [])]
        cpp = [p for p in files if is_cpp_file(p) and not p.startswith("..") and ".dist-info/" not in p]
        if cpp:
            out.append(replace(r, files=tuple(sorted(set(cpp), key=lambda p: (p.count("/"), p)))))
    return out


def cpp_repos(*, system: bool = True) -> list[Repo]:
    """The C/C++ "repositories" of the ci C/C++ corpus: :func:`installed_cpp_repos` plus, with
    ``system``, :func:`system_cpp_repos`. Introduced in lesson 01."""
    return installed_cpp_repos() + (system_cpp_repos() if system else [])


def select_cpp_repos(repos: Iterable[Repo], *, max_repos: int | None = None) -> Selection:
    """Keep the C/C++ repositories whose licence :func:`course_lib.data.filters.license_verdict` allows
    (the same permissive rule as the Python corpus; there are no stars or push dates for installed
    packages, so licence is the only criterion); at most ``max_repos`` (by name). Introduced in lesson 01."""
    sel = Selection()
    for r in repos:
        allowed, why = license_verdict(r.license or r.license_raw)
        (sel.kept.append(r) if allowed else sel.rejected.append((r, f"licence: {why}")))
    sel.kept.sort(key=lambda r: r.name)
    if max_repos is not None and len(sel.kept) > max_repos:
        sel.rejected += [(r, f"over max_repos: {max_repos}") for r in sel.kept[max_repos:]]
        sel.kept = sel.kept[:max_repos]
    return sel


def cpp_source_table(repos: Iterable[Repo] | None = None) -> list[dict]:
    """What C/C++ text is on this machine, per source (no file is read, only sized): ``repo``, ``source``
    (``site-packages`` / ``system``), ``version``, ``license``, ``verdict`` (kept, or the licence
    rejection), ``files``, ``headers``, ``sources``, ``mbytes``. Introduced in lesson 01."""
    from course_lib.data.clike import cpp_file_kind

    repos = cpp_repos() if repos is None else list(repos)
    sel = select_cpp_repos(repos)
    verdict = {r.name: "kept" for r in sel.kept} | {r.name: why for r, why in sel.rejected}
    rows = []
    for r in repos:
        size = 0
        for f in r.files:
            try:
                size += os.path.getsize(os.path.join(r.root, f))
            except OSError:
                pass
        kinds = [cpp_file_kind(f) for f in r.files]
        rows.append({"repo": r.name, "source": r.source, "version": r.version, "license": r.license,
                     "verdict": verdict[r.name], "files": len(r.files), "headers": kinds.count("header"),
                     "sources": kinds.count("source"), "mbytes": round(size / 1e6, 2)})
    return sorted(rows, key=lambda row: (row["source"], -row["mbytes"], row["repo"]))
