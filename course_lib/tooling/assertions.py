"""Assertions that say what they expected and what this run gave, in notebook kernels.

A failing ``assert a > b`` in a notebook cell raises a bare ``AssertionError``: the course run's table then
says "cell 31: AssertionError" and nobody can tell a broken course from a run whose numbers came out
differently. :func:`enable` registers an IPython AST transformer that rewrites every cell's ``assert``
statements the way pytest rewrites test modules (pytest's own rewriter, ``_pytest.assertion.rewrite``),
so the error carries the values: ``assert 0.388 > 0.396`` with the sub-expressions that produced them.
An assert with its own message keeps the message and gains the values.

``./course run`` and the notebook regression enable it in every kernel they start (an IPython startup file,
:func:`startup_dir`); a student can call :func:`enable` in JupyterLab. Without pytest nothing changes.

Introduced in lesson 00.
"""
from __future__ import annotations

import ast
from pathlib import Path

_STARTUP = "import course_lib.tooling.assertions as _course_asserts\n_course_asserts.enable()\ndel _course_asserts\n"


class RewriteAsserts(ast.NodeTransformer):
    """IPython AST transformer: pytest's assertion rewriting applied to one cell. Introduced in lesson 00."""

    def visit_Module(self, node: ast.Module) -> ast.Module:
        if not any(isinstance(n, ast.Assert) for n in ast.walk(node)):
            return node
        try:
            from _pytest.assertion.rewrite import rewrite_asserts
        except ImportError:          # no pytest: plain asserts
            return node
        rewrite_asserts(node, b"")
        _fix_line_ranges(node)
        return node


def _fix_line_ranges(tree: ast.AST) -> None:
    """pytest places the imports it adds at the first statement's line without an end; IPython then fills the
    missing end from the module (line 1), so a cell that starts with a comment gets nodes that end before they
    start, which the compiler refuses ("AST node line range (2, 1) is not valid"). End such nodes where they start."""
    for n in ast.walk(tree):
        start = getattr(n, "lineno", None)
        if start is None or "end_lineno" not in n._attributes:
            continue
        end = getattr(n, "end_lineno", None)
        if end is None or end < start:
            n.end_lineno = start
            n.end_col_offset = getattr(n, "col_offset", 0) or 0


def enable(shell=None) -> bool:
    """Rewrite the asserts of every later cell of the running IPython kernel (``shell``: default the
    current one) so a failure shows the compared values. Returns False outside IPython or without pytest.
    Introduced in lesson 00."""
    try:
        import _pytest.assertion.rewrite  # noqa: F401
    except ImportError:
        return False
    if shell is None:
        try:
            from IPython import get_ipython
        except ImportError:
            return False
        shell = get_ipython()
    if shell is None:
        return False
    if not any(isinstance(t, RewriteAsserts) for t in shell.ast_transformers):
        shell.ast_transformers.append(RewriteAsserts())
    return True


def startup_dir(base: Path) -> Path:
    """An ``IPYTHONDIR`` under ``base`` whose default profile enables :func:`enable` at kernel start
    (the course runner points ``IPYTHONDIR`` at it). Introduced in lesson 00."""
    startup = Path(base) / "profile_default" / "startup"
    startup.mkdir(parents=True, exist_ok=True)
    (startup / "00-course-asserts.py").write_text(_STARTUP, encoding="utf-8")
    return Path(base)
