"""Shared test setup: modest thread counts, the repository root, and executed-notebook records."""
from __future__ import annotations

import os

# Keep BLAS/torch in the test process to one thread: the unit tests' models are tiny, and the sandbox
# runs tests start beside them. The notebook regression's kernels do not inherit these limits
# (tests/notebook_helpers.machine_threads): they run with the machine's threads, as under `./course run`.
THREAD_LIMITS = [v for v in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS") if v not in os.environ]
for _var in THREAD_LIMITS:
    os.environ[_var] = "1"
os.environ["COURSE_TEST_THREAD_LIMITS"] = ",".join(THREAD_LIMITS)
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("MPLBACKEND", "Agg")

from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def repo() -> Path:
    """The repository root."""
    return ROOT


@pytest.fixture(scope="session")
def notebook_records():
    """``notebook_records("04")`` → the values lesson 04's solution recorded with ``course_lib.record``
    (executes the notebook with the ci profile if the regression has not done so in this build)."""
    from tests.notebook_helpers import records_of

    return records_of


def pytest_collection_modifyitems(session, config, items):
    """Run unit tests first, then the notebook regression (solutions 00→09, then student notebooks),
    then the tests that read recorded values — so those reuse the regression's executed copies and the
    caches that earlier lessons built (a lesson never runs twice just for its records)."""
    def rank(item) -> int:
        if item.get_closest_marker("notebooks") is None:
            return 0
        if item.module.__name__.endswith("test_notebooks") and item.name.startswith(
                ("test_solution_notebook", "test_student_notebook")):
            return 1
        return 2

    items.sort(key=rank)  # stable: keeps file order and parametrize order inside each group

    global _PREFETCH
    from tests._drill_prefetch import DrillPrefetch

    if DrillPrefetch.wanted(items):   # lesson 07's drill beside the unit tests (tests/_drill_prefetch.py)
        from tests.notebook_helpers import regression_dir

        _PREFETCH = DrillPrefetch(ROOT, regression_dir("solutions").parent / "drill-prefetch.log")
        _PREFETCH.start()


_PREFETCH = None


def pytest_runtest_setup(item):
    if _PREFETCH is not None and item.get_closest_marker("notebooks") is not None:
        _PREFETCH.wait()     # no notebook runs beside the background drill


def pytest_sessionfinish(session, exitstatus):
    if _PREFETCH is not None:
        _PREFETCH.stop()


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if _PREFETCH is not None and _PREFETCH.summary():
        terminalreporter.write_line(_PREFETCH.summary())


# --- the real sandbox backends (tests/test_sandbox_attacks.py, tests/test_sandbox_judging.py) -----

@pytest.fixture(scope="module")
def docker_session():
    """The course's dockerd and the offline image, started for a module that needs Docker."""
    from tests._sandbox_support import DockerSession

    session = DockerSession()
    session.start()
    yield session
    session.stop()


@pytest.fixture(params=("bwrap", "docker"))
def backend(request):
    """Each real backend in turn; bwrap cases never start (or need) a Docker daemon."""
    from tests._sandbox_support import REAL_BACKENDS, ensure_backend

    assert request.param in REAL_BACKENDS
    session = request.getfixturevalue("docker_session") if request.param == "docker" else None
    ensure_backend(request.param, session)
    return request.param
