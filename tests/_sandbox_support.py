"""Shared helpers of the sandbox tests: which real backends must run, and a Docker daemon fixture.

A backend that cannot run here is skipped with its reason — unless ``$SANDBOX_REQUIRE_BACKENDS`` names
it (``.ci/run`` sets ``bwrap,docker``), then the test fails: in CI neither backend may be skipped.
"""
from __future__ import annotations

import os

import pytest

REAL_BACKENDS = ("bwrap", "docker")


def required_backends() -> set[str]:
    return {b.strip() for b in os.environ.get("SANDBOX_REQUIRE_BACKENDS", "").split(",") if b.strip()}


def unavailable(backend: str, reason: str) -> None:
    """Skip (or, when the backend is required, fail) with a sentence saying why."""
    msg = f"sandbox backend {backend!r} cannot run here: {reason}"
    if backend in required_backends():
        pytest.fail(msg + " (required by SANDBOX_REQUIRE_BACKENDS)")
    pytest.skip(msg)


class DockerSession:
    """Starts the course's dockerd (and builds the offline image) when needed; stops what it started."""

    def __init__(self) -> None:
        self.daemon = None
        self.error = None

    def start(self) -> None:
        from course_lib.evaluation.sandbox.docker import ensure_docker
        from course_lib.evaluation.sandbox.policy import _probe_cache

        try:
            self.daemon = ensure_docker(build=True)
        except Exception as exc:  # noqa: BLE001 - reported by the tests that need Docker
            self.error = f"{type(exc).__name__}: {exc}"
        _probe_cache.pop("docker", None)

    def stop(self) -> None:
        if self.daemon is not None:
            self.daemon.stop()
        from course_lib.evaluation.sandbox.policy import _probe_cache

        _probe_cache.pop("docker", None)


def ensure_backend(backend: str, docker_session: DockerSession | None = None) -> None:
    from course_lib.evaluation.sandbox.policy import _probe

    if backend == "docker" and docker_session is not None and docker_session.error:
        unavailable(backend, docker_session.error)
    ok, reason = _probe(backend)
    if not ok:
        unavailable(backend, reason)
