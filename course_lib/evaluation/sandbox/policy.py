"""Which backend runs a sample: one rule for the whole course.

    explicit argument  >  $SANDBOX_BACKEND  >  the configured backend (``configured=``: the caller's
    profile's ``sandbox.backend``) when it works  >  bwrap  >  docker

The profile's ``sandbox.backend`` is the one setting and ``$SANDBOX_BACKEND`` its one override, read here
and nowhere else (:func:`named_backend`, at each call; a resolved profile does not change with it). Nothing
here reads a profile: a caller that has one passes its ``sandbox.backend`` as ``configured``; with
``configured=None`` nothing is configured and the rule goes on to bwrap, then docker.

``auto`` (as an argument or in ``$SANDBOX_BACKEND``) means "no explicit choice". ``unsafe`` is only ever
used when named. :func:`resolve_backend` returns an explicit choice without probing it (a run on a
backend that cannot start is a ``sandbox_error`` result) and raises when nothing works;
:func:`preferred_backend` probes even an explicit choice and returns None when nothing works.

Introduced in lesson 06.
"""
from __future__ import annotations

import os
import time

from course_lib.evaluation.sandbox.execute import BACKENDS, run_one
from course_lib.evaluation.sandbox.limits import Limits

REAL_BACKENDS = ("bwrap", "docker")
BACKEND_ENV = "SANDBOX_BACKEND"   # the one override of the profiles' sandbox.backend
DOCKER_PROBE_TTL_S = 30.0   # a daemon can come and go; bwrap's answer does not change within a process
_probe_cache: dict[str, tuple[bool, str, float]] = {}


def _probe(name: str) -> tuple[bool, str]:
    """(works, reason) for a backend, by really running a tiny sample (cached per process; Docker's
    answer for :data:`DOCKER_PROBE_TTL_S`)."""
    if name in _probe_cache:
        ok, reason, when = _probe_cache[name]
        if name != "docker" or time.monotonic() - when < DOCKER_PROBE_TTL_S:
            return ok, reason
    ok, reason = False, ""
    if name == "docker":
        from course_lib.evaluation.sandbox import docker as d

        if not d.daemon_answers():
            reason = "no Docker daemon answers (start one: `python -m course_lib.evaluation.sandbox daemon`)"
        elif not d.image_exists():
            reason = f"the {d.IMAGE!r} image is missing (build it: `python -m course_lib.evaluation.sandbox image`)"
        else:
            ok = True
    else:
        try:
            r = run_one("assert 1 + 1 == 2", [compile("assert True", "<probe>", "exec")], Limits(), name)
            ok, reason = r.status == "passed", (r.detail or r.stderr.strip()[-300:])
        except (FileNotFoundError, OSError) as exc:
            reason = str(exc)
    _probe_cache[name] = (ok, reason, time.monotonic())
    return ok, reason


def available_backends() -> dict[str, str]:
    """Each real backend with "ok" or the reason it cannot run here (whether bwrap's memory limit is per
    sample: :func:`course_lib.evaluation.sandbox.cgroups.cgroup_support`). Introduced in lesson 06."""
    return {name: ("ok" if ok else reason) for name in REAL_BACKENDS for ok, reason in [_probe(name)]}


def _configured(configured: str | None) -> str:
    return str(configured or "auto").lower()


def _candidates(configured: str | None) -> list[str]:
    order = list(REAL_BACKENDS)
    choice = _configured(configured)
    if choice in order:
        order.remove(choice)
        order.insert(0, choice)
    return order


def _explicit(backend: str | None) -> str | None:
    """The explicit choice: the argument, else ``$SANDBOX_BACKEND``; ``auto`` in either is no choice."""
    for name in (backend, os.environ.get(BACKEND_ENV)):
        name = (name or "").lower()
        if name and name != "auto":
            if name not in BACKENDS:
                raise ValueError(f"unknown sandbox backend {name!r}; choose one of auto, {', '.join(BACKENDS)}")
            return name
    return None


def named_backend(backend: str | None = None, *, configured: str | None = None) -> str:
    """The backend the rule names before anything is probed: the explicit choice (``backend``, else
    ``$SANDBOX_BACKEND``), else ``configured`` (the caller's profile's ``sandbox.backend``), else ``"auto"``.
    It is the backend a run uses when that backend works (what the full profile's preflight checks).
    Introduced in lesson 06."""
    return _explicit(backend) or _configured(configured)


def preferred_backend(configured: str | None = None) -> str | None:
    """The sandbox backend to use here and now, or None when no sandbox works: ``$SANDBOX_BACKEND`` when
    set (read at each call; probed, except ``unsafe``), else ``configured`` (the caller's profile's
    ``sandbox.backend``; None: nothing configured) when it works, else bubblewrap, else Docker.
    Introduced in lesson 06."""
    explicit = _explicit(None)
    if explicit is not None:
        return explicit if explicit == "unsafe" or _probe(explicit)[0] else None
    for cand in _candidates(configured):
        if _probe(cand)[0]:
            return cand
    return None


def resolve_backend(backend: str | None = None, *, configured: str | None = None) -> str:
    """The backend to use: the argument, else ``$SANDBOX_BACKEND`` (either returned as named, not
    probed), else — for ``auto`` or nothing — the same rule as :func:`preferred_backend`; raises a
    RuntimeError that says what to install when nothing works. Introduced in lesson 06."""
    explicit = _explicit(backend)
    if explicit is not None:
        return explicit
    reasons = []
    for cand in _candidates(configured):
        ok, reason = _probe(cand)
        if ok:
            return cand
        reasons.append(f"{cand}: {reason}")
    raise RuntimeError("no sandbox backend works here (" + "; ".join(reasons) + "). Install bubblewrap "
                       "(`apt-get install bubblewrap`) or Docker (`apt-get install docker.io`), or — only "
                       "on a throwaway machine — set SANDBOX_BACKEND=unsafe (NOT isolation).")
