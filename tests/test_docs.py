"""The docs cannot go stale silently: every ``course_lib`` name and every file path that README.md and
docs/*.md name in backticks exists, and every command in their fenced blocks parses (``--help`` exits 0).

What counts as a name: ``course_lib.a.b.c`` in backticks (a module, or a module's attribute, after any
call's parentheses are cut), and ``pkg.module.attr`` / ``module.attr`` whose first word is a package or
module of course_lib (``drill.inference.signature_prefix``, ``rollouts.build_rl_prompts``). A path: a
backticked word with a ``/`` that starts at one of the repository's top folders (``course_lib/``,
``lessons/``, ``docs/`` …); words with a placeholder (``<``, ``{``, ``*``, ``NN``, ``...``) are patterns
and are not checked.
"""
from __future__ import annotations

import importlib
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import course_lib

ROOT = Path(course_lib.__file__).resolve().parent.parent
PKG = ROOT / "course_lib"
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
TOP_FOLDERS = ("course_lib/", "lessons/", "docs/", "tests/", "scripts/", "assets/", "benchmarks/", "notebooks/",
               "solutions/")
PLACEHOLDERS = ("<", ">", "{", "}", "*", "NN", "...", "…", "$", "~")

FILE_SUFFIXES = ("py", "json", "jsonl", "png", "csv", "md", "yaml", "txt", "ipynb", "safetensors", "sh", "toml")
# dotted words that are neither course_lib names nor profile keys, with what they are
NOT_CODE = {
    "corpus.held_out_names": "a key of course_model.json",
    "corpus.fingerprint": "a key of course_model.json",
    "result.backend": "a field of a SandboxResult value",
    "finetune.llamafactory": "LazyLLM's lazyllm.finetune.llamafactory",
}

_TICKS = re.compile(r"`([^`\n]+)`")
_DOTTED = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+")


def _modules() -> dict[str, list[str]]:
    """Last name of every course_lib module → the dotted names (relative to course_lib) that end with it."""
    out: dict[str, list[str]] = {}
    for path in PKG.rglob("*.py"):
        rel = path.relative_to(PKG).with_suffix("")
        parts = [p for p in rel.parts if p != "__init__"]
        if parts:
            out.setdefault(parts[-1], []).append(".".join(parts))
    return out


MODULES = _modules()
FULL_NAMES = {d for names in MODULES.values() for d in names}


def _profile_key(dotted: str) -> bool:
    """Whether ``section.key`` is a key of the ci or the full profile (the docs name settings so)."""
    from course_lib.profiles import get_profile

    section, _, key = dotted.partition(".")
    return any(section in P.sections and key in P.sections[section] for P in (get_profile("ci"), get_profile("full")))


def _resolve(dotted: str) -> bool:
    """Whether ``course_lib.<dotted>`` is a module, or an attribute reached from one."""
    parts = dotted.split(".")
    for n in range(len(parts), 0, -1):
        mod = ".".join(parts[:n])
        if mod not in FULL_NAMES:
            continue
        obj = importlib.import_module(f"course_lib.{mod}")
        for attr in parts[n:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    obj = course_lib
    for attr in parts:      # a name course_lib's own __init__ hands on
        if not hasattr(obj, attr):
            return False
        obj = getattr(obj, attr)
    return True


def _named(doc: Path):
    """(line, text in backticks) of the doc, code blocks left out."""
    in_block = False
    for i, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1):
        if line.lstrip().startswith("```"):
            in_block = not in_block
            continue
        if not in_block:
            for m in _TICKS.finditer(line):
                yield i, m.group(1).strip()


def _names(doc: Path):
    for line, text in _named(doc):
        m = _DOTTED.match(text)
        if not m or any(p in text.split("(")[0] for p in PLACEHOLDERS):
            continue
        dotted = m.group(0)
        if dotted.rsplit(".", 1)[-1] in FILE_SUFFIXES or dotted in NOT_CODE:
            continue
        if dotted.startswith("course_lib."):
            yield line, dotted, dotted[len("course_lib."):]
            continue
        first = dotted.split(".")[0]
        if first in ("self", "cfg", "P", "np", "torch", "os", "sys"):
            continue
        candidates = [d for d in FULL_NAMES if d == first or d.endswith("." + first)]
        # a name relative to a package or module of course_lib: accept it where any reading resolves
        if candidates or _profile_key(dotted):
            yield line, dotted, [c + dotted[len(first):] for c in candidates] + [("profile", dotted)]


def _paths(doc: Path):
    for line, text in _named(doc):
        word = text.split()[0] if text.split() else ""
        word = word.rstrip(".,:;)")
        if word.startswith(TOP_FOLDERS) and not any(p in word for p in PLACEHOLDERS):
            yield line, word.split("::")[0]


NAME_CASES = [(doc, line, shown, target) for doc in DOCS for line, shown, target in _names(doc)]
PATH_CASES = [(doc, line, word) for doc in DOCS for line, word in _paths(doc)]


def test_the_docs_name_something():
    assert len(NAME_CASES) > 50 and len(PATH_CASES) > 20


def test_every_named_function_exists():
    missing = []
    for doc, line, shown, target in NAME_CASES:
        targets = [target] if isinstance(target, str) else target
        if not any(_profile_key(t[1]) if isinstance(t, tuple) else _resolve(t) for t in targets):
            missing.append(f"{doc.relative_to(ROOT)}:{line}: `{shown}`")
    assert not missing, "names in the docs that course_lib does not have:\n" + "\n".join(missing)


def test_every_named_path_exists():
    missing = [f"{doc.relative_to(ROOT)}:{line}: `{word}`" for doc, line, word in PATH_CASES
               if not (ROOT / word).exists()]
    assert not missing, "paths in the docs that the repository does not have:\n" + "\n".join(missing)


def _commands():
    """(doc, line, argv up to the first option) of every course command in a fenced block."""
    seen = set()
    for doc in DOCS:
        in_block = False
        for i, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1):
            if line.lstrip().startswith("```"):
                in_block = not in_block
                continue
            words = line.split("#")[0].split()
            if not in_block or not words:
                continue
            if words[0] == "./course":
                argv = ["./course"]
                rest = words[1:]
            elif words[:2] == ["python", "-m"] and len(words) > 2 and words[2].startswith("course_lib"):
                argv = [sys.executable, "-m", words[2]]
                rest = words[3:]
            else:
                continue
            for w in rest:
                if w.startswith("-") or w == "\\" or any(p in w for p in PLACEHOLDERS) or "/" in w or "=" in w:
                    break
                argv.append(w)
            if tuple(argv) not in seen:
                seen.add(tuple(argv))
                yield doc, i, argv


COMMANDS = list(_commands())


@pytest.mark.parametrize("doc,line,argv", COMMANDS, ids=[" ".join(a[-2:]) for _, _, a in COMMANDS])
def test_every_command_in_the_docs_parses(doc, line, argv):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    res = subprocess.run([*argv, "--help"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, (f"{doc.relative_to(ROOT)}:{line}: `{' '.join(argv)} --help` exited "
                                 f"{res.returncode}:\n{res.stderr[-800:]}")
