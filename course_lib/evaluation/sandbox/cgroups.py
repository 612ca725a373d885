"""One memory, process and CPU budget per sample: a cgroup per run (v2, or the v1 controllers).

A sample's processes all go into one fresh cgroup, so ``memory_mb`` bounds the sample as a whole
(forked children, ``memfd`` and ``/tmp`` pages included), ``pids`` bounds how many processes it has at
once and ``cpu`` gives it one core. cgroup v2 (``memory.max``, ``pids.max``, ``cpu.max``) is used where
``/sys/fs/cgroup`` is a unified hierarchy with those controllers; otherwise the v1 controllers mounted at
``/sys/fs/cgroup/{memory,pids,cpu}`` (``memory.limit_in_bytes`` + ``memory.memsw.limit_in_bytes``,
``pids.max``, ``cpu.cfs_quota_us``). Both need write access (root). :func:`cgroup_support` says whether
this works here and, if not, why; the bwrap backend then falls back to per-process rlimits and says
that its memory limit is per process, not per sample.

Introduced in lesson 06.
"""
from __future__ import annotations

import os
import signal
import time
import uuid
from pathlib import Path

ROOT = Path(os.environ.get("SANDBOX_CGROUP_ROOT", "/sys/fs/cgroup"))
PARENT = "course-sandbox"
CPU_PERIOD_US = 100_000

_support: tuple[str | None, str] | None = None   # (version "v1"/"v2" or None, reason)


def _v2_ok() -> bool:
    ctl = ROOT / "cgroup.controllers"
    return ctl.exists() and {"memory", "pids", "cpu"} <= set(ctl.read_text().split())


def _parents(version: str) -> list[Path]:
    """Where a run's cgroups go. CPU: at the top of the hierarchy, so each sample competes with the
    machine's other processes like one process (inside a shared parent, all samples together would get
    the weight of one process). Memory and pids (v1): under ``course-sandbox``."""
    if version == "v2":
        return [ROOT]
    return [ROOT / "memory" / PARENT, ROOT / "pids" / PARENT, ROOT / "cpu"]


def cgroup_support() -> tuple[str | None, str]:
    """``("v2" | "v1", "")`` when a per-run cgroup can be made here, else ``(None, reason)``.
    Checked once per process by creating and removing a test cgroup. Introduced in lesson 06."""
    global _support
    if _support is not None:
        return _support
    version = "v2" if _v2_ok() else ("v1" if all((ROOT / c).is_dir() for c in ("memory", "pids", "cpu")) else None)
    if version is None:
        _support = (None, f"no cgroup v2 with memory/pids/cpu and no v1 memory, pids and cpu controllers under {ROOT}")
        return _support
    try:
        probe = RunCgroup(64, 8, 1.0, _version=version)
        probe.remove()
        _support = (version, "")
    except OSError as exc:
        _support = (None, f"cannot create a cgroup under {ROOT} ({exc.strerror or exc}); run as root")
    return _support


class RunCgroup:
    """The cgroup(s) of one run: created with the limits, entered by the sample's first process
    (:meth:`enter_argv`), read after the run (:meth:`oom_killed`), then emptied and removed."""

    def __init__(self, memory_mb: int, max_procs: int, cpus: float, *, _version: str | None = None) -> None:
        self.version = _version or cgroup_support()[0]
        if self.version is None:
            raise OSError(cgroup_support()[1])
        name = f"{PARENT}-run-{os.getpid()}-{uuid.uuid4().hex[:10]}"
        self.dirs: list[Path] = []
        try:
            for parent in _parents(self.version):
                parent.mkdir(exist_ok=True)
                if self.version == "v2":
                    sub = parent / "cgroup.subtree_control"
                    if not {"memory", "pids", "cpu"} <= set(sub.read_text().split()):
                        sub.write_text("+memory +pids +cpu")
                d = parent / name
                d.mkdir()
                self.dirs.append(d)
            limit = memory_mb * 1024 * 1024
            quota = int(cpus * CPU_PERIOD_US)
            if self.version == "v2":
                d = self.dirs[0]
                (d / "memory.max").write_text(str(limit))
                (d / "memory.swap.max").exists() and (d / "memory.swap.max").write_text("0")
                (d / "pids.max").write_text(str(max_procs))
                (d / "cpu.max").write_text(f"{quota} {CPU_PERIOD_US}")
            else:
                mem, pids, cpu = self.dirs
                (mem / "memory.limit_in_bytes").write_text(str(limit))
                if (mem / "memory.memsw.limit_in_bytes").exists():
                    (mem / "memory.memsw.limit_in_bytes").write_text(str(limit))
                (pids / "pids.max").write_text(str(max_procs))
                (cpu / "cpu.cfs_period_us").write_text(str(CPU_PERIOD_US))
                (cpu / "cpu.cfs_quota_us").write_text(str(quota))
        except OSError:
            self.remove()
            raise

    def enter_argv(self, argv: list[str]) -> list[str]:
        """``argv`` prefixed by a shell that moves itself into the cgroup(s) and then execs ``argv``, so
        every process of the run is inside from its start."""
        script = ('n=$1; shift; while [ "$n" -gt 0 ]; do echo $$ > "$1/cgroup.procs" || exit 125; '
                  'shift; n=$((n-1)); done; exec "$@"')
        return ["/bin/sh", "-c", script, "sh", str(len(self.dirs)), *map(str, self.dirs), *argv]

    def oom_killed(self) -> bool:
        """True when the kernel's OOM killer ended a process of this run (the memory budget was hit)."""
        try:
            if self.version == "v2":
                events = (self.dirs[0] / "memory.events").read_text()
            else:
                events = (self.dirs[0] / "memory.oom_control").read_text()
        except OSError:
            return False
        for line in events.splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill" and value.strip() not in ("", "0"):
                return True
        return False

    def _pids(self) -> list[int]:
        pids: set[int] = set()
        for d in self.dirs:
            try:
                pids.update(int(p) for p in (d / "cgroup.procs").read_text().split())
            except (OSError, ValueError):
                pass
        return sorted(pids)

    def remove(self) -> None:
        """Kill whatever is still in the cgroup(s), then remove them."""
        left = []
        for d in self.dirs:  # usually empty by now: removing is one rmdir each
            try:
                d.rmdir()
            except FileNotFoundError:
                pass
            except OSError:
                left.append(d)
        self.dirs = left
        if not left:
            return
        for d in self.dirs:
            if self.version == "v2" and (d / "cgroup.kill").exists():
                try:
                    (d / "cgroup.kill").write_text("1")
                except OSError:
                    pass
        pause = 0.001   # processes killed a moment ago are usually gone within a few milliseconds
        for _ in range(60):
            pids = self._pids()
            if not pids:
                break
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(pause)
            pause = min(pause * 2, 0.02)
        for d in reversed(self.dirs):
            pause = 0.001
            for _ in range(60):
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(pause)
                    pause = min(pause * 2, 0.02)
        self.dirs = []
