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
from dataclasses import dataclass
from typing import Iterator

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
