"""A catalogue of attacks a sampled program could make, to show what each backend contains.

Each attack prints ``ESCAPED`` when it gets through; it is *contained* when the sandbox stops it (no
``ESCAPED`` in the output) and reports one of the expected statuses. ``tests/test_sandbox_attacks.py``
runs a stricter version with host-side checks; the benchmark and lesson 06 print this table.

Introduced in lesson 06.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from course_lib.paths import repo_root


@dataclass(frozen=True)
class Attack:
    """One attack: its sample code, the statuses that mean "contained", and whether it is harmless to
    run without isolation (``unsafe`` backend runs only those)."""

    name: str
    code: str
    contained: tuple[str, ...] = ("passed",)
    timeout_s: float = 3.0
    harmless_on_host: bool = False
    tests: tuple[str, ...] = ()


def _tries(expr: str) -> str:
    return (f"try:\n    _got = {expr}\n    print('ESCAPED', repr(_got)[:120])\n"
            f"except BaseException as exc:\n    print('blocked:', type(exc).__name__)\n")


def attack_catalogue(project_dir: str | Path | None = None) -> list[Attack]:
    """The attacks of the lesson (read the project, /etc/shadow, the environment, /proc/cmdline; network,
    AF_VSOCK; host writes; killing processes; fork bomb; setsid daemon; 1 GiB; CPU spin; endless output;
    filling /tmp; a faked pass; an answer equal to everything; walking the frames to the tests; the
    Docker socket). Introduced in lesson 06."""
    project = str(project_dir or repo_root() or Path.cwd())
    return [
        Attack("read the project folder", _tries(f"__import__('os').listdir({project!r})"), harmless_on_host=True),
        Attack("read /etc/shadow", _tries("open('/etc/shadow').read()"), harmless_on_host=True),
        Attack("read the host's environment",
               "import os\nfor k in ('HOME', 'PATH', 'VIRTUAL_ENV', 'COURSE_PROFILE', 'SSH_AUTH_SOCK', 'HF_TOKEN'):\n"
               "    v = os.environ.get(k, '')\n"
               "    if v and ('/root' in v or '/work' in v or k in ('SSH_AUTH_SOCK', 'HF_TOKEN', 'VIRTUAL_ENV')):\n"
               "        print('ESCAPED', k)\n", harmless_on_host=True),
        Attack("connect to a loopback port", _tries("__import__('socket').create_connection(('127.0.0.1', 22), 1)"),
               harmless_on_host=True),
        Attack("resolve and reach pypi.org", _tries("__import__('socket').create_connection(('pypi.org', 443), 2)"),
               harmless_on_host=True),
        Attack("reach the Docker socket",
               "import socket\nfor p in ('/var/run/docker.sock', '/run/course-sandbox/docker.sock'):\n"
               + "\n".join("    " + line for line in _tries("socket.socket(socket.AF_UNIX).connect(p)").splitlines())
               + "\n", harmless_on_host=True),
        Attack("write outside /tmp", _tries("open('/usr/lib/.sandbox-was-here', 'w').write('x')")),
        Attack("delete outside /tmp", _tries("__import__('os').remove('/etc/hostname')")),
        Attack("signal a process outside the sample",
               "import os\nown = {os.getpid(), os.getppid(), 1}  # the sample, its supervisor, the sandbox's init\n"
               "try:\n    pids = sorted(int(p) for p in os.listdir('/proc') if p.isdigit())\n"
               "except OSError:\n    pids = range(2, 4096)  # /proc hidden: try pids blindly\n"
               "for pid in pids:\n"
               "    if pid in own:\n        continue\n"
               "    try:\n        os.kill(pid, 0)  # signal 0: 'could I kill it?'\n        print('ESCAPED', pid)\n        break\n"
               "    except OSError:\n        pass\n", harmless_on_host=True),
        Attack("open an AF_VSOCK socket (the host VM's port space)", _tries("__import__('socket').socket(40, 1)"),
               harmless_on_host=True),
        Attack("read /proc/cmdline", _tries("open('/proc/cmdline').read()"), harmless_on_host=True),
        Attack("fork bomb", "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n",
               contained=("timeout", "runtime_error", "memory_limit")),
        Attack("setsid daemon", "import os, time\nif os.fork() == 0:\n    os.setsid()\n    time.sleep(60)\n"
                                "print('parent done')\n"),
        Attack("allocate 1 GiB", "x = bytearray(1024 ** 3)\n", contained=("memory_limit",), harmless_on_host=True),
        Attack("spin the CPU", "while True:\n    pass\n", contained=("timeout",), timeout_s=1.5, harmless_on_host=True),
        Attack("print forever", "while True:\n    print('spam' * 100)\n", contained=("output_limit",),
               harmless_on_host=True),
        Attack("fill /tmp", "i = 0\nwhile True:\n    open(f'/tmp/fill{i}', 'wb').write(b'x' * 4_000_000)\n    i += 1\n",
               contained=("runtime_error",)),
        Attack("fake a pass with os._exit(0)", "import os\nos._exit(0)\n", contained=("failed",),
               harmless_on_host=True, tests=("assert False",)),
        Attack("an answer equal to everything", "class E:\n    def __eq__(self, other):\n        return True\n"
               "def add(a, b):\n    return E()\n", contained=("failed",), harmless_on_host=True,
               tests=("assert add(2, 3) == 5",)),
        Attack("walk the frames to the tests", "import sys\ndef add(a, b):\n    f = sys._getframe()\n"
               "    while f is not None:\n        for k, v in list(f.f_globals.items()):\n"
               "            if type(v).__name__ == 'code':\n                print('ESCAPED: a test is in reach')\n"
               "        f = f.f_back\n    return 0\n", contained=("failed",), harmless_on_host=True,
               tests=("assert add(2, 3) == 5",)),
    ]


def attack_outcome(attack: Attack, result) -> str:
    """"contained" or what went wrong ("ESCAPED", or the unexpected status). Introduced in lesson 06."""
    if "ESCAPED" in result.stdout:
        return "ESCAPED"
    if result.status not in attack.contained:
        return f"unexpected: {result.status}"
    return "contained"


def run_attacks(backends: Iterable[str], *, workers: int = 4) -> dict[str, dict[str, str]]:
    """Run the catalogue on each backend: ``{attack: {backend: outcome}}``. On ``unsafe`` only the attacks
    that are harmless without isolation run (the others say "not run"). Introduced in lesson 06."""
    from course_lib.evaluation.sandbox import run_many

    catalogue = attack_catalogue()
    table = {a.name: {} for a in catalogue}
    for backend in backends:
        chosen = [a for a in catalogue if backend != "unsafe" or a.harmless_on_host]
        items = [{"code": a.code, "timeout_s": a.timeout_s, "tests": list(a.tests) or None} for a in chosen]
        results = run_many(items, workers=workers, backend=backend, progress=False)
        for a in catalogue:
            table[a.name][backend] = "not run (would harm the host)"
        for a, r in zip(chosen, results):
            table[a.name][backend] = f"{attack_outcome(a, r)} ({r.status})"
    return table
