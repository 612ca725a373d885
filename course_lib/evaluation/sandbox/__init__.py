"""Run untrusted, model-written Python code in a sandbox and judge it from outside.

One interface, several backends (``bwrap``, ``docker``, ``unsafe``; ``auto`` picks), chosen with the
``backend`` argument or ``$SANDBOX_BACKEND``, else the caller's profile's ``sandbox.backend``
(:mod:`.policy`)::

    from course_lib.evaluation.sandbox import run_code, run_many
    r = run_code("def add(a, b):\\n    return a + b", "assert add(1, 2) == 3")
    r.status   # 'passed'

The program runs in the sandbox; its tests run in the calling process and reach the program only
through calls whose answers are plain data (:mod:`~course_lib.evaluation.sandbox.judge`).

C++ (issue 38): :func:`run_cpp_tests` compiles a function with g++ in the sandbox, runs it there with a
generated driver and judges its answers here, with the same statuses (:mod:`.cpp`).

Statuses: ``passed``, ``failed`` (a test failed, the program exited early or broke the protocol),
``syntax_error``, ``runtime_error``, ``timeout``, ``memory_limit``, ``output_limit``, ``sandbox_error``.

Modules: :mod:`.run` (run_code, run_many), :mod:`.policy` (which backend), :mod:`.execute` (one run),
:mod:`.judge` and :mod:`.wire` (the judge and its protocol), :mod:`.inside` (the in-sandbox server),
:mod:`.cpp` (the C++ judge), :mod:`.backends`, :mod:`.limits`, :mod:`.cgroups`, :mod:`.seccomp`, :mod:`.runtime`, :mod:`.docker`,
:mod:`.attacks`.

Introduced in lesson 06.
"""
from __future__ import annotations

from course_lib.evaluation.sandbox.cpp import run_cpp_many, run_cpp_tests
from course_lib.evaluation.sandbox.execute import BACKENDS
from course_lib.evaluation.sandbox.limits import DEFAULT_MEMORY_MB, DEFAULT_TIMEOUT_S, Limits, UidLease
from course_lib.evaluation.sandbox.policy import available_backends, named_backend, preferred_backend, resolve_backend
from course_lib.evaluation.sandbox.result import STATUSES, SandboxResult, summarize
from course_lib.evaluation.sandbox.run import run_code, run_many

__all__ = ["run_code", "run_many", "run_cpp_tests", "run_cpp_many", "SandboxResult", "STATUSES", "BACKENDS", "resolve_backend",
           "preferred_backend", "named_backend", "available_backends", "summarize", "Limits", "UidLease",
           "DEFAULT_TIMEOUT_S", "DEFAULT_MEMORY_MB"]
