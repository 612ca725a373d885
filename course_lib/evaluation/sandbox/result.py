"""What one sandbox run produced: :class:`SandboxResult`, its statuses, and :func:`summarize`.

Introduced in lesson 06.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

STATUSES = ("passed", "failed", "syntax_error", "runtime_error", "timeout", "memory_limit",
            "output_limit", "sandbox_error")


@dataclass
class SandboxResult:
    """What happened to one sample. ``tests`` holds one outcome per test item that ran (``ok``, ``assert``,
    ``error``); ``test_errors`` the one-line reason of each test that did not pass (``""`` for a passing one).

    ``planned`` says, for every test item given to the run (counted before it), whether it is a test
    (an assertion, a ``check(...)`` call) or a setup line (imports, definitions, assignments): the
    counts :attr:`tests_passed` / :attr:`tests_total` are over the planned tests, so setup lines are not
    tests and a run that ended early has failed every test it never answered. Empty (a result made
    by hand): every outcome is a test. ``exited_at_load``: the program ended — an exit, a death, a
    broken report — before its code finished loading, so no test could run (the lecture's reward
    counts that as a runtime error). ``compile_s``: the seconds a C++ sample spent compiling
    (:mod:`course_lib.evaluation.sandbox.cpp`; ``None`` for Python)."""

    status: str
    stdout: str = ""
    stderr: str = ""
    duration_s: float = 0.0
    exit_code: int | None = None
    backend: str = ""
    tests: list[str] = field(default_factory=list)
    detail: str = ""
    test_errors: list[str] = field(default_factory=list)
    planned: list[bool] = field(default_factory=list)
    exited_at_load: bool = False
    compile_s: float | None = None

    @property
    def passed(self) -> bool:
        return self.status == "passed"

    @property
    def tests_passed(self) -> int:
        """Planned tests whose outcome is ``ok``."""
        if not self.planned:
            return sum(t == "ok" for t in self.tests)
        return sum(t == "ok" for t, is_test in zip(self.tests, self.planned) if is_test)

    @property
    def tests_total(self) -> int:
        """The planned tests (answered or not)."""
        return sum(self.planned) if self.planned else len(self.tests)

    def __repr__(self) -> str:
        extra = f", tests={self.tests_passed}/{self.tests_total}" if self.tests else ""
        detail = f", detail={self.detail[:80]!r}" if self.detail else ""
        return (f"SandboxResult(status={self.status!r}{extra}, backend={self.backend!r}, "
                f"duration_s={self.duration_s:.3f}{detail})")


def summarize(results: Iterable[SandboxResult]) -> dict[str, int]:
    """Count results per status (every status present, zeros included). Introduced in lesson 06."""
    counts = {s: 0 for s in STATUSES}
    for r in results:
        counts[r.status] = counts.get(r.status, 0) + 1
    return counts
