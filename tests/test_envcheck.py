"""The environment report of lesson 00 (`./course env`)."""
from __future__ import annotations

import sys
import types

from course_lib.tooling import envcheck


def test_every_pyproject_requirement_is_checked():
    statuses = envcheck.check_packages()
    names = {s.name for s in statuses}
    assert {"torch", "papermill", "nbconvert", "pytest"} <= names
    torch = next(s for s in statuses if s.name == "torch")
    assert torch.installed and torch.ok


def test_a_missing_package_is_reported_not_raised(monkeypatch):
    monkeypatch.setattr(envcheck, "_requirements", lambda extras=("dev",): [("no-such-pkg-xyz", ">=1", "")])
    [status] = envcheck.check_packages()
    assert status.installed is None and not status.ok


def test_report_names_python_gpu_sandbox_and_caches():
    env = envcheck.collect_environment(sandbox=False)
    assert env["python"]["ok"] == (sys.version_info[:2] == (3, 11))
    text = envcheck.format_report(env)
    for word in ("Python", "packages:", "GPU:", "sandbox:", "caches:", "course cache", "suggested profile"):
        assert word in text


def test_sandbox_probe_uses_course_lib_sandbox(monkeypatch):
    fake = types.ModuleType("course_lib.evaluation.sandbox")
    fake.available_backends = lambda: {"bwrap": "ok", "docker": "no Docker daemon answers"}
    monkeypatch.setitem(sys.modules, "course_lib.evaluation.sandbox", fake)
    info = envcheck.check_sandbox()
    assert info["backends"] == {"bwrap": True, "docker": "no Docker daemon answers"}
    text = envcheck.format_report({**envcheck.collect_environment(sandbox=False), "sandbox": info})
    assert "✓ bwrap" in text and "✗ docker: no Docker daemon answers" in text


def test_human_size():
    assert envcheck.human_size(512) == "512 B"
    assert envcheck.human_size(3 * 1024 * 1024) == "3.0 MB"
