"""Code extraction from a model's answer: the first thing step 5 of the drill does.

Answers put code in Markdown fences, with a language tag (```` ```python ````, ```` ```py ````), without
one (```` ``` ````), several blocks, or none at all. The rules, in order:

1. Collect fenced blocks line by line (a fence is a line starting with three or more backticks). A block
   left open at the end of the answer (generation stopped mid-block) counts, up to the end.
2. Keep blocks tagged as Python (``python``, ``py``, ``python3``, ``py3``) and untagged blocks; drop
   blocks tagged with another language (``bash``, ``text``, ``json`` ...).
3. Several kept blocks are joined with a blank line, in order (a function and its usage example).
4. No kept block → ``None`` (the report's NoCode category), even if the answer looks like code: the
   lesson's format asks for fenced code, and FCR measures exactly that.

The parser is line-based and linear in the answer's length (a 100 KB answer is no problem).

**Other languages** (issue 38): every function takes ``language`` (:data:`LANGUAGE_TAGS`); with
``language="cpp"`` rule 2 keeps blocks tagged ``cpp``, ``c++``, ``cc`` or ``cxx`` (and untagged ones), so FCR
counts ```` ```cpp ```` fences, and :func:`answer_lead_in` stops at the first line of a cpp fence that
begins a function definition (``long long f(...) {``), keeping the ``#include`` lines above it.

Introduced in lesson 06.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

# the fence tags read as Python (the drill's ablation filter reads them too)
PYTHON_TAGS = frozenset({"python", "py", "python3", "py3", "ipython", "pycon"})
_CPP_TAGS = frozenset({"cpp", "c++", "cc", "cxx"})
LANGUAGE_TAGS: dict[str, frozenset[str]] = {"python": PYTHON_TAGS, "cpp": _CPP_TAGS}
"""The fence tags whose blocks count as code of each language (untagged blocks count for every one)."""
# a line that starts a C++ function definition: a return type and a name at column 0, then "(", no ";"
_CPP_DEFINITION = re.compile(r"^(?!#|return\b|using\b|typedef\b)[A-Za-z_][\w:<>,&*\s]*?[\s&*]\**[A-Za-z_]\w*\s*\([^;]*$")


def _tags(language: str) -> frozenset[str]:
    try:
        return LANGUAGE_TAGS[language]
    except KeyError:
        raise ValueError(f"unknown language {language!r}; known: {', '.join(LANGUAGE_TAGS)}") from None


@dataclass(frozen=True)
class CodeBlock:
    """One fenced block: its language tag (``""`` when untagged), its text, and whether it was closed."""

    tag: str
    code: str
    closed: bool


def _fence_tag(stripped: str) -> str:
    """The language tag of a fence line (already stripped), lower-cased; ``""`` when untagged."""
    rest = stripped.strip("`").strip()
    return rest.split()[0].lower() if rest else ""


def find_code_blocks(answer: str) -> list[CodeBlock]:
    """All fenced blocks of ``answer`` in order (any language). Introduced in lesson 06."""
    blocks: list[CodeBlock] = []
    tag, lines, inside = "", [], False
    for line in answer.splitlines():
        stripped = line.strip()
        if stripped.startswith("```"):
            if not inside:
                inside, lines = True, []
                tag = _fence_tag(stripped)
                continue
            if stripped.strip("`") == "":
                blocks.append(CodeBlock(tag, "\n".join(lines) + "\n", True))
                inside = False
                continue
        if inside:
            lines.append(line)
    if inside and lines:
        blocks.append(CodeBlock(tag, "\n".join(lines) + "\n", False))
    return blocks


def extract_code(answer: str | None, language: str = "python") -> str | None:
    """The code in ``answer`` (fenced blocks tagged with the language — Python by default, C++ with
    ``language="cpp"`` — or untagged, joined), or ``None``.

    Introduced in lesson 06; ``language`` for issue 38.
    """
    tags = _tags(language)
    if not answer:
        return None
    kept = [b.code for b in find_code_blocks(answer) if b.tag in tags or b.tag == ""]
    kept = [c for c in kept if c.strip()]
    return "\n\n".join(c.rstrip("\n") for c in kept) + "\n" if kept else None


def has_fenced_code(answer: str | None, language: str = "python") -> bool:
    """True when ``answer`` holds at least one *closed* fence of the language (Python by default, C++
    with ``language="cpp"``) or untagged fence (the FCR criterion).

    Introduced in lesson 06; ``language`` for issue 38.
    """
    tags = _tags(language)
    if not answer:
        return False
    return any(b.closed and b.code.strip() and (b.tag in tags or b.tag == "")
               for b in find_code_blocks(answer))


def answer_lead_in(answer: str | None, language: str = "python") -> str | None:
    """The part of ``answer`` before its first function definition: everything up to the first line
    that starts with ``def `` inside a Python (or untagged) fence, that fence's opening line included.
    None when the answer defines no function in such a fence.

    Test pass@1 keeps a model's own lead-in (prose, the fence) and gives it the ``def`` line the task
    asks for (:func:`course_lib.drill.inference.signature_prefix`). With ``language="cpp"``: up to the
    first line of a C++ (or untagged) fence that begins a function definition (a return type and a name
    at the start of the line, then ``(``, no ``;``), so the ``#include`` lines above it are kept.
    Introduced in lesson 06; ``language`` for issue 38.
    """
    tags = _tags(language) | {""}
    if not answer:
        return None
    offset, inside, python = 0, False, False
    for line in answer.splitlines(keepends=True):
        stripped = line.strip()
        if stripped.startswith("```"):
            if not inside:
                inside = True
                python = _fence_tag(stripped) in tags
            elif stripped.strip("`") == "":
                inside = False
        elif inside and python and (line.startswith("def ") if language == "python"
                                    else _CPP_DEFINITION.match(line.rstrip("\n")) is not None):
            return answer[:offset]
        offset += len(line)
    return None
