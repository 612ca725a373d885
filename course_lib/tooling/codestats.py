"""Counting the lines of a source file: code, comments, blank lines.

The first exercise of the course (lesson 00) and a first taste of the per-file statistics the data
filters of lesson 01 compute.

Introduced in lesson 00.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LineStats:
    """How the lines of one file split up. ``code + comment + blank == total``."""

    total: int
    code: int
    comment: int
    blank: int


def _kind(line: str) -> str:
    stripped = line.strip()
    if not stripped:
        return "blank"
    if stripped.startswith("#"):
        return "comment"
    return "code"


def count_code_lines(source: str) -> int:
    """Number of lines that hold code: not blank and not only a ``#`` comment (docstrings count as
    code). Introduced in lesson 00."""
    return sum(_kind(line) == "code" for line in source.splitlines())


def line_stats(source: str) -> LineStats:
    """Code, comment and blank line counts of ``source``. Introduced in lesson 00."""
    kinds = [_kind(line) for line in source.splitlines()]
    return LineStats(len(kinds), kinds.count("code"), kinds.count("comment"), kinds.count("blank"))
