"""The artefact store: one way for every stage of the course to cache what it builds.

A stage (the corpus, the deduplicated corpus, the tiny model, the instruction set, ...) asks for its
artefact with :func:`get_or_build`. The artefact's folder is named after a key made from three things:

- the stage's **config** (the profile section and arguments that decide the result),
- the **upstream** fingerprints (the keys of the artefacts it was built from), so a changed corpus
  rebuilds everything downstream of it,
- the **code version**: a hash of the source of the modules that build it, so editing a rule rebuilds.

The builder writes into a fresh temporary folder beside the final one. Only when it returns does the
store write a completion marker (``.complete.json``) and publish the folder: the final path is a
symbolic link swapped atomically with ``os.replace``, so a reader sees the old complete artefact or
the new complete one — never a half-written folder and never a moment with no folder. A folder
without a valid marker (a crash, a marker holding ``[]`` or ``null``) counts as absent and is rebuilt.

Two file-level primitives are shared with stages that keep single files at fixed names (the drill of
lesson 07): :func:`atomic_write_text` (a temporary file in the same folder, fsync, ``os.replace``) and
:func:`sha256_file`.

Introduced in lesson 01; used by every lesson that caches.
"""
from __future__ import annotations

import contextlib
import hashlib
import inspect
import json
import os
import shutil
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Iterable, Mapping

from course_lib.paths import cache_dir

MARKER = ".complete.json"


@dataclass(frozen=True)
class Artefact:
    """A complete artefact: its folder, its key and what its marker recorded."""

    stage: str
    path: Path
    key: str
    meta: Mapping[str, Any]
    built: bool  # True when this call built it, False when it came from the cache


def sha256_file(path: str | Path) -> str:
    """The SHA-256 of a file's bytes (hex), read in 1 MiB chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


@contextlib.contextmanager
def file_lock(path: str | Path):
    """Hold an exclusive ``flock`` on ``path`` (created when missing) for the ``with`` block: two processes
    that build the same artefact wait for each other instead of building it twice."""
    import fcntl

    with open(path, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def atomic_write_text(path: str | Path, text: str) -> Path:
    """Write ``text`` to ``path`` through a temporary file in the same folder (``.<name>.<pid>.tmp``),
    fsync and a rename: a reader sees the old file or the new one, never half of it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    return path


def code_version(*modules: ModuleType | str | Path) -> str:
    """A short hash of the source of the given modules (module objects, or paths to source files)."""
    h = hashlib.sha256()
    for m in modules:
        path = Path(inspect.getsourcefile(m)) if isinstance(m, ModuleType) else Path(m)
        h.update(path.name.encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:12]


def artefact_key(config: Any, *, upstream: Iterable[str] = (), code: Iterable[ModuleType | str | Path] = ()
                 ) -> str:
    """The key of an artefact: config + upstream fingerprints + code version, 16 hex digits."""
    payload = {"config": config, "upstream": list(upstream), "code": code_version(*code) if code else ""}
    blob = json.dumps(payload, sort_keys=True, default=str, ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]


def read_marker(path: Path) -> dict | None:
    """The completion marker of ``path`` as a dict, or None when it is missing or malformed."""
    try:
        data = json.loads((Path(path) / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("key"), str) else None


def is_complete(path: Path, key: str | None = None) -> bool:
    """True when ``path`` holds a complete artefact (and, with ``key``, the one with that key)."""
    marker = read_marker(path)
    return marker is not None and (key is None or marker["key"] == key)


def fingerprint(path: Path) -> str:
    """The key of the complete artefact at ``path`` — what a downstream stage passes as ``upstream``."""
    marker = read_marker(path)
    if marker is None:
        raise FileNotFoundError(f"{path} is not a complete artefact (no valid {MARKER}); build it first")
    return marker["key"]


def publish(tmp: Path, final: Path, *, key: str, stage: str, meta: Mapping[str, Any] | None = None) -> Path:
    """Write the marker into ``tmp`` and make ``final`` point at it atomically; return ``final``.

    ``final`` becomes (or stays) a symbolic link to a sibling folder ``<final>.<id>``; the previous
    version is kept until the next switch (readers that resolved the link just before it still find
    their files) and older versions are removed."""
    tmp, final = Path(tmp), Path(final)
    marker = {"key": key, "stage": stage, "created": time.strftime("%Y-%m-%dT%H:%M:%S"),
              "meta": dict(meta or {})}
    (tmp / MARKER).write_text(json.dumps(marker, indent=1, default=str), encoding="utf-8")
    version = final.with_name(f"{final.name}.{uuid.uuid4().hex[:8]}")
    os.replace(tmp, version)
    previous = Path(os.readlink(final)) if final.is_symlink() else None
    if final.exists() and not final.is_symlink():  # a plain folder from before: move it aside first
        aside = final.with_name(f"{final.name}.old-{uuid.uuid4().hex[:8]}")
        os.replace(final, aside)
        previous = aside
    link = final.with_name(f".{final.name}.link-{uuid.uuid4().hex[:8]}")
    os.symlink(version.name, link)
    os.replace(link, final)  # atomic switch
    # The previous version stays until the next switch: a reader whose open() resolved the link just
    # before this switch still finds its files. Older versions go now.
    keep = {version.name}
    if previous is not None:
        keep.add((previous if previous.is_absolute() else final.parent / previous).name)
    for old in final.parent.glob(f"{final.name}.*"):
        if old.name not in keep and old.is_dir() and not old.is_symlink():
            shutil.rmtree(old, ignore_errors=True)
    return final


def artefact_path(stage: str, name: str, config: Any, *, upstream: Iterable[str] = (),
                  code: Iterable[ModuleType | str | Path] = (), root: Path | None = None) -> Path:
    """Where :func:`get_or_build` keeps this artefact (complete or not): ``<cache>/<stage>/<name>-<key>``."""
    base = Path(root) if root is not None else cache_dir(stage)
    return base / f"{name}-{artefact_key(config, upstream=list(upstream), code=code)}"


def get_or_build(stage: str, name: str, config: Any, builder: Callable[[Path], Mapping[str, Any] | None], *,
                 upstream: Iterable[str] = (), code: Iterable[ModuleType | str | Path] = (),
                 rebuild: bool = False, root: Path | None = None, log: Callable[[str], None] | None = None
                 ) -> Artefact:
    """The artefact ``<cache>/<stage>/<name>-<key>``: from the cache when complete, else built.

    ``builder(folder)`` fills a fresh folder and may return a dict of metadata (counts, timings) that
    is stored in the marker. An exception in the builder leaves the cache as it was and propagates.
    ``rebuild=True`` builds even when a complete artefact exists (and replaces it atomically)."""
    upstream, code = list(upstream), list(code)
    final = artefact_path(stage, name, config, upstream=upstream, code=code, root=root)
    key = final.name[len(name) + 1:]
    base = final.parent
    base.mkdir(parents=True, exist_ok=True)
    if not rebuild and is_complete(final, key):
        return Artefact(stage, final, key, read_marker(final)["meta"], built=False)
    if final.exists() and not rebuild and log is not None:
        log(f"{stage}: {final.name} is incomplete (no valid {MARKER}) — rebuilding it")
    tmp = base / f".{name}-{key}.tmp-{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    try:
        meta = builder(tmp) or {}
        publish(tmp, final, key=key, stage=stage, meta={**dict(meta), "upstream": upstream})
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return Artefact(stage, final, key, read_marker(final)["meta"], built=True)
