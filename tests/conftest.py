"""Shared test setup: modest thread counts, the repository root, and executed-notebook records."""
from __future__ import annotations

import json
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
    """Run unit tests first, then the notebook regression (solutions 00→11, then student notebooks),
    then the tests that read recorded values — so those reuse the regression's executed copies and the
    caches that earlier lessons built (a lesson never runs twice just for its records).

    With pytest-xdist (``./course test`` runs two workers, ``-n 2 --dist loadgroup``) the notebook side is one
    group that a single worker runs in that order, from the start, while the other worker takes the unit
    tests (:func:`xdist_group_of`); the tests that use the Docker daemon are another group, so one process
    starts and stops it."""
    def rank(item) -> int:
        if item.get_closest_marker("notebooks") is None:
            return 0
        if item.module.__name__.endswith("test_notebooks") and item.name.startswith(
                ("test_solution_notebook", "test_student_notebook")):
            return 1
        return 2

    items.sort(key=rank)  # stable: keeps file order and parametrize order inside each group
    if parallel(config):
        # the drill's command-line test first (the unit-test worker starts with it), then the notebook side with the
        # lessons that read the drill (07, 10, 11) after the others' solution and student runs, so they find it done
        def order(it) -> tuple:
            if it.name == DRILL_TEST:
                return (0, 0, False)
            if xdist_group_of(it) == "notebooks":
                return (1, rank(it), rank(it) == 1 and lesson_of(it) in DRILL_LESSONS)
            return (2, 0, False)

        items.sort(key=order)
        groups = {it.nodeid: g for it in items if (g := xdist_group_of(it))}
        path = os.environ.get(GROUPS_ENV)
        if path and config.workerinput.get("workerid") == "gw0":   # every worker collects the same items
            from course_lib.store import atomic_write_text

            atomic_write_text(path, json.dumps(groups))


DRILL_TEST = "test_the_regression_drill_runs_from_the_command_line"   # tests/test_drill_regression.py
DRILL_LESSONS = ("07", "10", "11")   # the lessons that read the drill's folder


def lesson_of(item) -> str | None:
    """The lesson id a notebook test runs (``[07_tiny_codes_drill]``, ``[10]``), else None."""
    import re

    m = re.search(r"\[(\d\d)(?:_|\])", item.name)
    return m.group(1) if m else None


def pytest_runtest_setup(item):
    """In a two-worker session the notebook worker waits for the drill's command-line test (on the other worker)
    before a lesson that reads the drill's folder: one drill folder, one writer."""
    if (parallel(item.config) and lesson_of(item) in DRILL_LESSONS and xdist_group_of(item) == "notebooks"
            and any(it.name == DRILL_TEST for it in item.session.items)):
        from tests.test_drill_regression import wait_for_drill

        wait_for_drill()


def pytest_runtest_teardown(item, nextitem):
    if parallel(item.config) and item.name == DRILL_TEST:    # passed, failed or skipped: the notebook worker goes on
        from tests.test_drill_regression import say_drill_done

        say_drill_done("ended")


def parallel(config) -> bool:
    """True in a pytest-xdist worker (``-n 2``): the session is split between processes."""
    return hasattr(config, "workerinput")


# pytest-xdist's own ``xdist_group`` marks do not reach its scheduler under pytest 9.2 (xdist 3.8 renames
# ``item._nodeid``, which pytest 9.2 no longer reads), so the groups travel in a file instead: the first
# worker writes {nodeid: group} after collecting, and the controller's scheduler reads it.
GROUPS_ENV = "COURSE_TEST_XDIST_GROUPS"


def pytest_configure(config):
    if getattr(config.option, "dist", "no") == "loadgroup" and not parallel(config):   # the controller
        import tempfile

        fd, path = tempfile.mkstemp(prefix="course-xdist-groups-", suffix=".json")
        os.close(fd)
        os.unlink(path)
        os.environ[GROUPS_ENV] = path      # the workers start after this and inherit it
        config._course_groups_file = path


def pytest_unconfigure(config):
    path = getattr(config, "_course_groups_file", None)
    if path:
        for leftover in (Path(path), Path(path + ".drill-done")):   # the groups and the drill test's marker
            leftover.unlink(missing_ok=True)


@pytest.hookimpl(optionalhook=True)   # a pytest-xdist hook: unknown without it
def pytest_xdist_make_scheduler(config, log):
    """``--dist loadgroup`` with the course's groups (:func:`xdist_group_of`), read from the first worker's file."""
    if getattr(config.option, "dist", "no") != "loadgroup":
        return None
    from xdist.scheduler import LoadGroupScheduling

    config.option.loadscopereorder = False   # keep the collection order: the drill test and the notebook side first

    class CourseGroups(LoadGroupScheduling):
        _groups: dict | None = None

        def _split_scope(self, nodeid: str) -> str:
            if self._groups is None:
                file = Path(os.environ.get(GROUPS_ENV, "/nonexistent"))
                self._groups = json.loads(file.read_text()) if file.exists() else {}
                if not self._groups:
                    self.log("no course test groups found: every test is its own unit")
            return self._groups.get(nodeid) or super()._split_scope(nodeid)

    return CourseGroups(config, log)


NOTEBOOK_SIDE = ("test_slides",)   # modules whose unmarked tests read the regression's executed copies when present


def xdist_group_of(item) -> str | None:
    """The pytest-xdist group of a test: ``notebooks`` for the notebook regression, the tests that read its
    executed copies or records, and the slide tests (they export the executed copies when present, so they
    must see them complete or not at all); ``docker`` for the tests that use the Docker daemon (a module's
    ``docker_session`` starts and stops it); None for the rest (any worker)."""
    if item.name == DRILL_TEST:     # the other worker's first test (tests/test_drill_regression.py)
        return None
    if (item.get_closest_marker("notebooks") is not None or "notebook_records" in item.fixturenames
            or item.module.__name__.rsplit(".", 1)[-1] in NOTEBOOK_SIDE):
        return "notebooks"
    if {"docker_session", "backend"} & set(item.fixturenames):
        return "docker"
    return None


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
