"""Stand-in for lesson 01's ``course_lib.corpus.load_corpus`` while that module is not merged.

Same signature and columns (repo, path, license, language, content, size, kept_reason), built from
the standard library and a few installed packages. Not part of the course's public surface.
"""
from __future__ import annotations

import sysconfig
from pathlib import Path

_PACKAGES = ["pip", "setuptools", "networkx", "datasketch", "tqdm", "jinja2", "markupsafe", "requests",
             "urllib3", "idna", "certifi", "charset_normalizer", "six", "attr", "attrs", "yaml", "pytz",
             "dateutil", "packaging", "click", "fsspec", "nbformat", "jsonschema", "pygments", "docutils"]


def load_corpus(profile: str = "ci", rebuild: bool = False):
    import datasets

    rows: dict[str, list] = {k: [] for k in ("repo", "path", "license", "language", "content", "size",
                                             "kept_reason")}
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    purelib = Path(sysconfig.get_paths()["purelib"])

    def add(repo: str, root: Path, files: list[Path], limit: int) -> None:
        for f in sorted(files)[:limit]:
            try:
                text = f.read_text(encoding="utf-8")
            except (UnicodeDecodeError, OSError):
                continue
            if not text.strip() or len(text) > 200_000:
                continue
            rows["repo"].append(repo)
            rows["path"].append(f.relative_to(root).as_posix())
            rows["license"].append("PSF-2.0" if repo == "cpython" else "MIT")
            rows["language"].append("Python")
            rows["content"].append(text)
            rows["size"].append(len(text.encode()))
            rows["kept_reason"].append("passed all filters")

    std_files = [p for p in stdlib.rglob("*.py") if "site-packages" not in p.parts and "test" not in p.parts
                 and "tests" not in p.parts and "idlelib" not in p.parts]
    add("cpython", stdlib, std_files, 1200)
    for name in _PACKAGES:
        pkg = purelib / name
        if pkg.is_dir():
            add(name, purelib, list(pkg.rglob("*.py")), 300)
        elif (purelib / f"{name}.py").exists():
            add(name, purelib, [purelib / f"{name}.py"], 1)
    return datasets.Dataset.from_dict(rows)
