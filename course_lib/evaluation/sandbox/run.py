"""The public run functions: :func:`run_code` (one program and its tests) and :func:`run_many` (a pool).

Introduced in lesson 06.
"""
from __future__ import annotations

import ast
import functools
import threading
import time
import warnings
from concurrent.futures import ThreadPoolExecutor, as_completed
from types import CodeType
from typing import Any, Callable, Iterable, Sequence

from course_lib.evaluation.sandbox.execute import run_one
from course_lib.evaluation.sandbox.limits import MAX_PROGRAM_BYTES, Limits
from course_lib.evaluation.sandbox.policy import resolve_backend
from course_lib.evaluation.sandbox.result import SandboxResult

SANDBOX_ERROR_RETRIES = 1
"""A ``sandbox_error`` is the sandbox's failure, never the program's (the program's code runs only after the
sandbox reported that it started), so :func:`run_code` runs such a sample once more before it reports it:
on a busy machine a sandbox that failed to start should not turn a correct program into an unscored one."""

_unsafe_warned = False


def retry_sandbox_error(run_once: Callable[[], Any], backend: str) -> Any:
    """``run_once()``, run once more when it ends in a ``sandbox_error`` (:data:`SANDBOX_ERROR_RETRIES`); an
    exception it raises is that sample's ``sandbox_error``, never the caller's. The result reported is the last
    one, its ``.detail`` naming the first error. The Python judge (:func:`run_code`) and the C++ judge
    (``cpp.run_cpp_tests``) share it. Introduced in lesson 06."""
    first_error = ""
    for attempt in range(1 + SANDBOX_ERROR_RETRIES):
        try:
            result = run_once()
        except BaseException as exc:  # noqa: BLE001 - one sample's failure, never the caller's
            result = SandboxResult("sandbox_error", backend=backend, detail=f"the run could not finish: "
                                                                            f"{type(exc).__name__}: {exc}"[:500])
        if not (isinstance(result, SandboxResult) and result.status == "sandbox_error") or attempt == SANDBOX_ERROR_RETRIES:
            break
        first_error = result.detail
        time.sleep(0.5)
    if attempt and isinstance(result, SandboxResult):
        note = f"(a sandbox_error first, run again: {first_error})"[:300]
        result.detail = f"{result.detail} {note}".strip() if result.detail else note
    return result


def compile_tests(tests: str | Sequence[str] | None) -> list[CodeType]:
    """The tests as code objects for the judge (one source string, or a list: one outcome each); a test
    that does not compile raises ValueError naming it. Introduced in lesson 06."""
    if tests is None:
        return []
    tests = [tests] if isinstance(tests, str) else list(tests)
    out = []
    for i, t in enumerate(tests):
        if not isinstance(t, str):
            raise TypeError(f"test {i} is a {type(t).__name__}; tests must be Python source strings")
        try:
            out.append(_compile_test(t, i))
        except (SyntaxError, ValueError) as exc:
            raise ValueError(f"test {i} does not compile ({exc}); fix the tests, not the sample") from None
    return out


_SETUP_NODES = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Assign,
                ast.AnnAssign, ast.AugAssign, ast.Pass, ast.Global, ast.Nonlocal)


# CPython 3.11's ast module counts its recursion depth in state shared by all threads, so two threads building AST
# objects at once can raise "SystemError: AST constructor recursion depth mismatch" (seen in a clean-clone CI run:
# one HumanEval canonical solution judged as sandbox_error). The judge's worker threads parse through this lock.
_AST_LOCK = threading.Lock()


@functools.lru_cache(maxsize=4096)
def is_planned_test(source: str) -> bool:
    """Whether one test item is a test (counted before the run) or a setup line: an item is setup when
    every top-level statement is an import, a definition, an assignment or a docstring; anything else —
    an ``assert``, a call such as HumanEval's ``check(candidate)``, a loop — is a test. A source that
    does not parse counts as a test. Introduced in lesson 06."""
    try:
        with _AST_LOCK:
            body = ast.parse(source).body
    except (SyntaxError, ValueError):
        return True
    return not all(isinstance(n, _SETUP_NODES) or (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant))
                   for n in body)


def planned_tests(tests: str | Sequence[str] | None) -> list[bool]:
    """For each test item, whether it is a planned test (:func:`is_planned_test`) or setup: what
    :attr:`SandboxResult.planned` holds. Introduced in lesson 06."""
    if tests is None:
        return []
    return [is_planned_test(t) for t in ([tests] if isinstance(tests, str) else list(tests))]


@functools.lru_cache(maxsize=4096)
def _compile_test(source: str, index: int) -> CodeType:
    # the same hidden tests judge many samples (code objects are immutable: one per source is enough)
    return compile(source, f"<test {index}>", "exec", dont_inherit=True)


def run_code(code: str, tests: str | Sequence[str] | None = None, *, timeout_s: float | None = None,
             memory_mb: int | None = None, backend: str | None = None) -> SandboxResult:
    """Run ``code`` as a program (``solution.py``, module ``__main__``) in a sandbox and judge it with
    ``tests`` (one source string, or a list: one outcome each).

    The tests run in **this** process, not in the program's: the names the program defines are proxies
    whose calls are answered by the sandboxed program with plain data (:mod:`course_lib.evaluation.
    sandbox.judge`), so expected values never reach the program and nothing it prints or forges is a
    verdict. Without tests the program passes when it ends with exit status 0, as ``python solution.py``.

    ``timeout_s`` (wall clock, start-up not counted) and ``memory_mb`` default to 10 s and 128 MiB
    (:data:`~course_lib.evaluation.sandbox.limits.DEFAULT_TIMEOUT_S`, ``DEFAULT_MEMORY_MB``); invalid
    values raise ValueError. ``backend`` follows :func:`~course_lib.evaluation.sandbox.policy.resolve_backend`.
    The result's ``.status`` is one of :data:`STATUSES`; ``.stdout``/``.stderr`` are capped at 64 KiB;
    ``.tests`` lists the outcome of each test item that ran ("ok", "assert", "error"); ``.planned`` which
    items are tests rather than setup lines (:func:`planned_tests`), so ``.tests_total`` counts the planned
    tests, answered or not. Each run leases its own unprivileged uid. Nothing the program does makes
    this raise: any exception while running or judging it (even a ``BaseException``) is the sample's
    result. A ``sandbox_error`` (the sandbox's failure, not the program's) is run once more
    (:data:`SANDBOX_ERROR_RETRIES`); the second result is reported, its ``.detail`` naming the first error.
    Introduced in lesson 06.
    """
    global _unsafe_warned
    if not isinstance(code, str):
        raise TypeError(f"code must be a str of Python source, got {type(code).__name__}")
    size = len(code.encode("utf-8", "surrogatepass"))
    if size > MAX_PROGRAM_BYTES:
        raise ValueError(f"the program is {size / 2**20:.1f} MiB; the sandbox accepts programs up to "
                         f"{MAX_PROGRAM_BYTES // 2**20} MiB")
    test_codes = compile_tests(tests)
    limits = Limits.of(timeout_s, memory_mb)
    name = resolve_backend(backend)
    if name == "unsafe" and not _unsafe_warned:
        _unsafe_warned = True
        msg = ("SANDBOX_BACKEND=unsafe: samples run as plain subprocesses with rlimits — this is NOT "
               "isolation (they can read your files, use the network, kill processes). Use bwrap or docker.")
        warnings.warn(msg, RuntimeWarning, stacklevel=2)
    plan = planned_tests(tests)
    result = retry_sandbox_error(lambda: run_one(code, test_codes, limits, name), name)
    if isinstance(result, SandboxResult):
        result.planned = plan
    return result


def _as_kwargs(item: Any) -> dict:
    if isinstance(item, str):
        return {"code": item}
    if isinstance(item, dict):
        unknown = set(item) - {"code", "tests", "timeout_s", "memory_mb", "backend"}
        if unknown or "code" not in item:
            raise ValueError(f"a run_many item needs 'code' and may have tests/timeout_s/memory_mb/backend; "
                             f"got keys {sorted(item)}")
        return dict(item)
    raise TypeError(f"run_many items are code strings or dicts, got {type(item).__name__}")


def run_many(items: Iterable[Any], *, workers: int = 8, progress: bool = True, **kw) -> list[SandboxResult]:
    """Run many samples on a pool of ``workers`` (every run with its own leased sandbox uid); results
    come back in input order, and one broken sample — bad text, an invalid item — is a
    ``sandbox_error`` result for that sample, never an exception for the batch. ``items`` are code strings or dicts with
    :func:`run_code`'s keywords; ``kw`` gives defaults (``tests=``, ``timeout_s=``, ``backend=``, ...).
    Introduced in lesson 06.
    """
    jobs = [{**kw, **_as_kwargs(it)} for it in items]
    if not jobs:
        return []
    backend = resolve_backend(kw.get("backend"))
    for job in jobs:
        job.setdefault("backend", backend)
    n_workers = max(1, int(workers))
    results: list[SandboxResult | None] = [None] * len(jobs)

    def work(index: int) -> None:
        try:
            results[index] = run_code(**jobs[index])
        except BaseException as exc:  # noqa: BLE001 - never let one sample stop the batch
            results[index] = SandboxResult("sandbox_error", backend=jobs[index]["backend"],
                                           detail=f"{type(exc).__name__}: {exc}")

    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(jobs), desc=f"sandbox[{backend}]", unit="sample", leave=False)
    with ThreadPoolExecutor(max_workers=n_workers) as pool:
        futures = [pool.submit(work, i) for i in range(len(jobs))]
        for fut in as_completed(futures):
            fut.result()
            if bar is not None:
                bar.update(1)
    if bar is not None:
        bar.close()
    return [r for r in results]  # type: ignore[misc]
