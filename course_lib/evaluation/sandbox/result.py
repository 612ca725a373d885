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
    """What happened to one sample. ``tests`` holds one outcome per test (``ok``, ``assert``, ``error``);
    ``test_errors`` the one-line reason of each test that did not pass (``""`` for a passing one)."""

    status: str
    stdout: str = ""
    stderr: str = ""
    duration_s: float = 0.0
    exit_code: int | None = None
    backend: str = ""
    tests: list[str] = field(default_factory=list)
    detail: str = ""
    test_errors: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return self.status == "passed"

    @property
    def tests_passed(self) -> int:
        return sum(t == "ok" for t in self.tests)

    @property
    def tests_total(self) -> int:
        return len(self.tests)

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
