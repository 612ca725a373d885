"""The drill in the background while the unit tests run (CI budget, issue 33).

Lesson 07 runs the drill (steps 1–6, ~13 min of a 2-core CI machine from an empty cache) through the
same functions as ``python -m course_lib.drill --profile ci``, and every step is cached by what it was
made from. When a session runs the unit tests *and* lesson 07's solution notebook, the drill starts as a
separate process at the start of
the session (``python -m course_lib.drill --profile ci --quiet``, the machine's threads, the course's
cache). Before the first notebook test the session waits for it; lesson 07's notebook then finds its
steps done, exactly as a returning student does, and still runs and checks every cell. If the background
drill failed, the notebook runs the missing steps itself and fails on the same cause, with the log named.

Measured on a 2-core clean clone (2026-12-07, AMD EPYC AVX-512 BF16): the drill took 26 min beside the unit
tests, which ran ~9 min longer for it, and lesson 07's notebook 72 s instead of 788 s — about 4 min saved in
all, because the unit tests keep both cores busier than their one thread each suggests.

``COURSE_TEST_DRILL_PREFETCH=0`` turns it off. Its log: ``build/test-notebooks/drill-prefetch.log``.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

LESSON_07 = "test_solution_notebook_runs_with_strict_checks[07_tiny_codes_drill]"
COMMAND = ["-m", "course_lib.drill", "--profile", "ci", "--quiet"]   # lesson 07's own call, default parameters


class DrillPrefetch:
    def __init__(self, root: Path, log_path: Path) -> None:
        self.root, self.log_path = root, log_path
        self.proc: subprocess.Popen | None = None
        self.started = self.ended = 0.0
        self.rc: int | None = None

    @staticmethod
    def wanted(items) -> bool:
        """On when the session holds lesson 07's solution run and unit tests before it, and not turned off."""
        if os.environ.get("COURSE_TEST_DRILL_PREFETCH", "1") == "0":
            return False
        names = [it.name for it in items]
        return LESSON_07 in names and any(it.get_closest_marker("notebooks") is None for it in items)

    def start(self) -> None:
        env = dict(os.environ)
        for name in [n for n in env.get("COURSE_TEST_THREAD_LIMITS", "").split(",") if n]:
            env.pop(name, None)      # the machine's threads, as lesson 07's kernel has them
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "w", encoding="utf-8")
        self.started = time.monotonic()
        self.proc = subprocess.Popen([sys.executable, *COMMAND], cwd=self.root, env=env, stdout=log,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        log.close()

    def wait(self) -> None:
        """Wait for the background drill (the first notebook test calls this)."""
        if self.proc is None or self.rc is not None:
            return
        self.rc = self.proc.wait()
        self.ended = time.monotonic()

    def stop(self) -> None:
        """End a run the session left behind (an interrupted or narrowed session)."""
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGINT)
                self.proc.wait(timeout=60)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self.proc.wait()
        if self.proc is not None and self.rc is None:
            self.rc = self.proc.returncode
            self.ended = time.monotonic()

    def summary(self) -> str:
        if self.proc is None:
            return ""
        took = f" in {self.ended - self.started:.0f} s" if self.ended else ""
        what = "finished" if self.rc == 0 else f"ended with exit code {self.rc}"
        return (f"the drill ran beside the unit tests (python {' '.join(COMMAND)}): {what}{took}; "
                f"log: {self.log_path}")
