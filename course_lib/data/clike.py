"""C and C++ source text for lessons 01-03: file kinds, a lexer, literal spans, tokens and ``#include`` lines.

What changes when the corpus pipeline meets C/C++ instead of Python is mostly *lexing*: comments are
``//`` and ``/* */``, strings have escapes, prefixes (``u8``, ``L``, ``u``, ``U``) and raw forms
(``R"delim(...)delim"``), ``'x'`` is a character literal but ``1'000`` is a number, and dependencies are
preprocessor lines (``#include "local.h"`` / ``#include <system>``), not statements. One lexer,
:func:`lex`, serves every later stage:

- redaction looks for secrets only inside comments and literals (:func:`literal_spans`);
- dedup shingles C-like tokens with comments dropped (:func:`clike_tokens`);
- dependency order reads ``#include`` directives from the token stream (:func:`include_directives`),
  so an ``#include`` inside a comment or a raw string is never read.

The lexer never raises: an unterminated comment or raw string runs to the end of the text, an
unterminated string or character literal to the end of its line.

Introduced in lesson 01 (file kinds, literal spans), lesson 02 (tokens) and lesson 03 (includes).
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterable, Iterator, Mapping, Sequence

if TYPE_CHECKING:
    import networkx as nx

# --- languages and file kinds -------------------------------------------------------------------------

LANGUAGES = ("python", "cpp")
"""The languages the corpus functions of lessons 01-03 take (``language=``)."""
_LANGUAGE_ALIASES = {"python": "python", "py": "python", "cpp": "cpp", "c++": "cpp", "cxx": "cpp",
                     "c": "cpp", "c/c++": "cpp"}


def normalize_language(language: str) -> str:
    """``"python"`` or ``"cpp"`` (``"c"``, ``"c++"``, ``"cxx"`` are read as ``"cpp"``: one pipeline
    serves both C and C++); anything else raises ``ValueError`` naming what is accepted.
    Introduced in lesson 01."""
    key = str(language).strip().lower() if isinstance(language, str) else None
    if key not in _LANGUAGE_ALIASES:
        raise ValueError(f"language {language!r} is not supported; use one of {', '.join(LANGUAGES)} "
                         f"(C and C++ are both 'cpp')")
    return _LANGUAGE_ALIASES[key]


HEADER_EXTENSIONS = (".h", ".hh", ".hpp", ".hxx", ".h++", ".inl", ".ipp", ".tcc", ".cuh")
SOURCE_EXTENSIONS = (".c", ".cc", ".cpp", ".cxx", ".c++", ".cu")
CPP_EXTENSIONS = HEADER_EXTENSIONS + SOURCE_EXTENSIONS
"""File extensions of C/C++ (and CUDA, which is C++ with kernels) text. ``.inl``/``.ipp``/``.tcc`` are
headers that hold template definitions and are included, never compiled alone."""


def cpp_file_kind(path: str) -> str | None:
    """``"header"``, ``"source"`` or None (not a C/C++ file) from the path alone. An extension-less file
    inside a ``c++`` folder (libstdc++'s ``c++/12/vector``) is a header. Introduced in lesson 01."""
    p = str(path).replace("\\", "/")
    ext = os.path.splitext(p)[1].lower()
    if ext in HEADER_EXTENSIONS:
        return "header"
    if ext in SOURCE_EXTENSIONS:
        return "source"
    if not ext and "c++" in p.split("/")[:-1]:
        return "header"
    return None


def is_cpp_file(path: str) -> bool:
    """Whether ``path`` names a C/C++ header or source (:func:`cpp_file_kind`). Introduced in lesson 01."""
    return cpp_file_kind(path) is not None


# --- the lexer ----------------------------------------------------------------------------------------

_PREFIX = r"(?:u8|u|U|L)?"
_TOKEN_RE = re.compile(
    r"(?P<nl>\n)"
    r"|(?P<ws>(?:[ \t\r\f\v]|\\\r?\n)+)"
    r"|(?P<line_comment>//(?:[^\\\n]|\\[\s\S])*)"
    r"|(?P<block_comment>/\*[\s\S]*?(?:\*/|\Z))"
    r"|(?P<raw_string>" + _PREFIX + r"R\"(?P<delim>[^()\\ \t\r\n\"]{0,16})\((?:[\s\S]*?\)(?P=delim)\"|[\s\S]*\Z))"
    r"|(?P<string>" + _PREFIX + r"\"(?:[^\"\\\n]|\\[\s\S])*\"?)"
    r"|(?P<char>" + _PREFIX + r"'(?:[^'\\\n]|\\[\s\S])*'?)"
    r"|(?P<number>\.?\d(?:[eEpP][+-]|'[0-9A-Za-z_]|[0-9A-Za-z_.])*)"
    r"|(?P<identifier>[A-Za-z_$][A-Za-z0-9_$]*)"
    r"|(?P<operator>>>=|<<=|<=>|->\*|\.\.\.|::|->|\+\+|--|<<|>>|&&|\|\||##|\.\*|[-+*/%&|^!=<>]="
    r"|[{}\[\]()#;:?.,~!+\-*/%&|^=<>])"
    r"|(?P<other>\S)")

TOKEN_KINDS = ("line_comment", "block_comment", "raw_string", "string", "char", "number", "identifier",
               "operator", "other")
COMMENT_KINDS = frozenset({"line_comment", "block_comment"})
LITERAL_KINDS = frozenset({"raw_string", "string", "char"})


@dataclass(frozen=True)
class Token:
    """One lexeme: ``kind`` (see :data:`TOKEN_KINDS`), ``text``, ``start``/``end`` offsets in the
    source, and ``line_start``: True when only whitespace precedes it on its line (a ``#`` there
    begins a preprocessor directive)."""

    kind: str
    text: str
    start: int
    end: int
    line_start: bool = False


def lex(text: str) -> Iterator[Token]:
    """The tokens of C/C++ ``text`` (whitespace and newlines left out), comments and literals included.
    Linear in the text; never raises. Introduced in lesson 01."""
    if not isinstance(text, str):
        raise TypeError(f"lex needs the source as a str, got {type(text).__name__}")
    at_line_start = True
    for m in _TOKEN_RE.finditer(text):
        kind = m.lastgroup
        if kind == "delim":          # the raw string's inner group: report the whole literal
            kind = "raw_string"
        if kind == "nl":
            at_line_start = True
            continue
        if kind == "ws":
            continue
        yield Token(kind, m.group(), m.start(), m.end(), at_line_start)
        if kind != "block_comment":  # ``/* x */ #define`` still starts a directive
            at_line_start = False


def literal_spans(text: str, *, comments: bool = True, literals: bool = True) -> list[tuple[int, int, str]]:
    """``(start, end, kind)`` of every comment and string/character literal of ``text``, in order (the
    places where a secret can sit in C/C++ without being code). The header name of an ``#include``
    line is not a literal. Introduced in lesson 01."""
    spans: list[tuple[int, int, str]] = []
    prev: list[Token] = []
    for tok in lex(text):
        if tok.kind in COMMENT_KINDS:
            if comments:
                spans.append((tok.start, tok.end, tok.kind))
            continue
        if tok.kind in LITERAL_KINDS and literals and not _after_include(prev):
            spans.append((tok.start, tok.end, tok.kind))
        prev = (prev + [tok])[-2:]
    return spans


def _after_include(prev: list[Token]) -> bool:
    return (len(prev) == 2 and prev[0].text == "#" and prev[0].line_start
            and prev[1].text in ("include", "include_next", "import"))


def clike_tokens(text: str) -> list[str]:
    """The C-like tokens of ``text`` for near-dedup: identifiers, keywords, numbers, operators and
    string/character literals, each as written; comments (and whitespace) dropped, so a changed licence
    header or reformatting does not change them. Introduced in lesson 02."""
    return [t.text for t in lex(text) if t.kind not in COMMENT_KINDS]


# --- #include directives ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class IncludeRef:
    """One ``#include``: ``target`` as written between the delimiters, ``system`` True for
    ``<target>`` (left out of dependency order), ``lineno`` (1-based) and ``directive``
    (``include``, ``include_next`` or ``import``). Introduced in lesson 03."""

    target: str
    system: bool
    lineno: int
    directive: str = "include"

    def written(self) -> str:
        return f"<{self.target}>" if self.system else f'"{self.target}"'


_ANGLE_RE = re.compile(r"<([^>\n]+)>")


def include_directives(text: str) -> list[IncludeRef]:
    """Every ``#include "x"`` / ``#include <x>`` (also ``# include``, ``#include_next``, ``#import``)
    of ``text``, read from the token stream: the ``#`` must begin its line, so an ``#include`` inside a
    comment, a string or a raw string literal is never read; computed includes (``#include MACRO``)
    are skipped. Introduced in lesson 03."""
    refs: list[IncludeRef] = []
    toks = lex(text)
    for tok in toks:
        if not (tok.text == "#" and tok.line_start):
            continue
        name = next(toks, None)
        while name is not None and name.kind == "block_comment":
            name = next(toks, None)
        if name is None or name.text not in ("include", "include_next", "import"):
            continue
        lineno = text.count("\n", 0, tok.start) + 1
        m = _ANGLE_RE.match(text, _skip_blanks_and_comments(text, name.end))
        if m:
            refs.append(IncludeRef(m.group(1).strip(), True, lineno, name.text))
            continue
        target = next(toks, None)
        while target is not None and target.kind == "block_comment":
            target = next(toks, None)
        if target is not None and target.kind == "string" and target.text.startswith('"') \
                and target.text.endswith('"') and len(target.text) >= 2:
            refs.append(IncludeRef(target.text[1:-1], False, lineno, name.text))
    return refs


def _skip_blanks_and_comments(text: str, pos: int) -> int:
    while pos < len(text):
        if text[pos] in " \t":
            pos += 1
        elif text.startswith("/*", pos):
            end = text.find("*/", pos + 2)
            pos = len(text) if end < 0 else end + 2
        else:
            break
    return pos


# --- C/C++: local #include "..." -------------------------------------------------------------------------
# What changes for C/C++: a dependency is a preprocessor line, not a statement; only ``#include "x"``
# names a file of the repository (``<x>`` is the compiler's search path: the system and libraries,
# left out); the name is a path resolved against the including file's folder and then the repository's
# include folders, not a dotted module. The graph then goes through the same orderings (order_scc).

def parse_includes(source: str) -> list[IncludeRef]:
    """Every ``#include`` of C/C++ ``source`` (quote and angle forms, ``include_next``, ``#import``),
    read from the token stream of :func:`include_directives`: includes inside comments, strings or
    raw strings are not read. Raises ``TypeError`` for anything but a ``str``. Introduced in lesson 03."""
    if not isinstance(source, str):
        raise TypeError(f"parse_includes needs the source as a str, got {type(source).__name__}")
    return include_directives(source)


def default_include_dirs(paths: Iterable[str]) -> tuple[str, ...]:
    """The repository's include folders when none are given: the repository root, then every folder
    named ``include`` (shallow first), as a build's ``-I`` flags usually are. Introduced in lesson 03."""
    import posixpath

    dirs = {posixpath.dirname(p) for p in paths}
    found = set()
    for d in dirs:
        parts = d.split("/")
        for k in range(len(parts)):
            if parts[k] == "include":
                found.add("/".join(parts[:k + 1]))
    return ("", *sorted(found, key=lambda d: (d.count("/"), d)))


def resolve_include(ref: IncludeRef, includer: str, paths: Iterable[str] | set[str],
                    include_dirs: Sequence[str] = ("",)) -> str | None:
    """The repository file a quote include means, or None: ``<system>`` includes are never followed
    (None); ``"x"`` is looked for beside the including file, then under each of ``include_dirs``
    (repository-relative folders, ``""`` = the root), the first existing path winning, as the
    preprocessor does; ``..`` is normalised and a path that climbs out of the repository is not a
    repository file. Introduced in lesson 03."""
    import posixpath

    if ref.system:
        return None
    paths = paths if isinstance(paths, (set, frozenset, dict)) else set(paths)
    target = ref.target.replace("\\", "/")
    if target.startswith("/"):
        return None  # an absolute host path is never a repository file
    for base in (posixpath.dirname(includer), *include_dirs):
        cand = posixpath.normpath(posixpath.join(base, target)) if base else posixpath.normpath(target)
        if cand.startswith("../") or cand == "..":
            continue
        if cand in paths and cand != includer:
            return cand
    return None


@dataclass
class IncludeStats:
    """What building an include graph saw: files, C/C++ files, includes found, local ones resolved
    to a repository file, system ``<...>`` ones left out, and quote includes that name no file of the
    repository (a generated or external header), with a few examples."""

    files: int = 0
    cpp_files: int = 0
    includes: int = 0
    local: int = 0
    system: int = 0
    unresolved: int = 0
    unresolved_examples: list[str] = field(default_factory=list)


def include_graph(files: Mapping[str, str], include_dirs: Sequence[str] | None = None,
                  stats: IncludeStats | None = None) -> "nx.DiGraph":
    """A DiGraph over every path in ``files`` with an edge ``header -> includer`` for each
    ``#include "..."`` that :func:`resolve_include` resolves to another file of the repository
    (``include_dirs`` default: :func:`default_include_dirs`). ``<...>`` includes add no edge. Non-C/C++
    files are isolated nodes. Pass an :class:`IncludeStats` to collect counts. Introduced in lesson 03."""
    import networkx as nx

    stats = stats if stats is not None else IncludeStats()
    g = nx.DiGraph()
    g.add_nodes_from(sorted(files))
    paths = set(files)
    cpp = sorted(p for p in files if is_cpp_file(p))
    dirs = tuple(include_dirs) if include_dirs is not None else default_include_dirs(cpp)
    stats.files, stats.cpp_files = len(files), len(cpp)
    for path in cpp:
        text = files[path]
        if not isinstance(text, str):
            text = text.decode("utf-8", "replace") if isinstance(text, (bytes, bytearray)) else ""
        for ref in parse_includes(text):
            stats.includes += 1
            if ref.system:
                stats.system += 1
                continue
            dep = resolve_include(ref, path, paths, dirs)
            if dep is None:
                stats.unresolved += 1
                if len(stats.unresolved_examples) < 5:
                    stats.unresolved_examples.append(f"{path}: {ref.written()}")
                continue
            stats.local += 1
            g.add_edge(dep, path)
    return g
