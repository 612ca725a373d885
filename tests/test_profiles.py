"""The two profiles: same shape, clear errors, the environment default."""
from __future__ import annotations

import pytest

from course_lib import PROFILES, get_profile
from course_lib.profiles import recommend_profile


def test_both_profiles_exist():
    assert set(PROFILES) == {"ci", "full"}
    assert get_profile("ci").device == "cpu"
    assert get_profile("full").device == "cuda"


def test_profiles_have_the_same_sections_and_full_has_every_ci_key():
    """Code that reads a ci setting must find it in full too; full may add settings for backends
    that only it uses (e.g. a GitHub query)."""
    ci, full = PROFILES["ci"], PROFILES["full"]
    assert set(ci.sections) == set(full.sections)
    for name in ci.sections:
        missing = set(ci.sections[name]) - set(full.sections[name])
        assert not missing, f"profile 'full', section {name!r} lacks {sorted(missing)}"


def test_values_read_as_attributes_and_items():
    ci = get_profile("ci")
    assert ci.dedup.threshold == ci.dedup["threshold"]
    assert 0 < ci.dedup.threshold <= 1


def test_unknown_profile_lists_what_exists():
    with pytest.raises(ValueError, match="ci, full"):
        get_profile("gpu")


def test_unknown_section_and_key_say_what_exists():
    ci = get_profile("ci")
    with pytest.raises(AttributeError, match="has no section 'nope'.*dedup"):
        ci.nope
    with pytest.raises(AttributeError, match="no setting 'nope'.*threshold"):
        ci.dedup.nope


def test_default_profile_comes_from_the_environment(monkeypatch):
    monkeypatch.delenv("COURSE_PROFILE", raising=False)
    assert get_profile().name == "ci"
    monkeypatch.setenv("COURSE_PROFILE", "full")
    assert get_profile().name == "full"


def test_sections_are_read_only():
    with pytest.raises(TypeError):
        get_profile("ci").dedup["threshold"] = 0.1


def test_ci_stays_small_and_offline():
    ci, full = get_profile("ci"), get_profile("full")
    assert ci.corpus.source != "github"
    assert ci.corpus.max_repos <= full.corpus.max_repos
    import re

    assert not re.fullmatch(r"[\w.-]+/[\w.-]+", str(ci.sft.base_model)), "the ci profile must not name a hub model"


def test_summary_names_the_profile():
    assert "profile 'ci'" in get_profile("ci").summary()


def test_recommend_profile():
    assert recommend_profile(True, True) == "full"
    assert recommend_profile(True, False) == "ci"
    assert recommend_profile(False, True) == "ci"
    assert recommend_profile(False, False) == "ci"


def test_sandbox_backend_is_one_key_and_its_variable_is_read_where_a_backend_is_chosen(monkeypatch):
    """``sandbox.backend`` is the one backend setting (the drill has none of its own); ``$SANDBOX_BACKEND``
    does not change a profile: the sandbox's policy reads it, its one reader."""
    import re
    from pathlib import Path

    import course_lib
    from course_lib.profiles import PROFILES, get_profile

    assert (PROFILES["ci"].sandbox.backend, PROFILES["full"].sandbox.backend) == ("bwrap", "docker")
    for P in PROFILES.values():
        assert not [k for sec in P.sections.values() for k in sec if "backend" in k and k != "backend"
                    and "inference" not in k], P.name        # no second spelling (drill.sandbox_backend)
    monkeypatch.setenv("SANDBOX_BACKEND", "docker")
    assert get_profile("ci").sandbox.backend == "bwrap"
    pkg = Path(course_lib.__file__).parent
    readers = sorted(str(p.relative_to(pkg)) for p in pkg.rglob("*.py")
                     if re.search(r"environ[^\n]*(SANDBOX_BACKEND|BACKEND_ENV)", p.read_text(encoding="utf-8")))
    assert readers == ["evaluation/sandbox/policy.py"], readers


def test_the_profile_is_resolved_only_where_a_run_starts():
    """``get_profile`` is called in course_lib only by command lines (their ``main`` / argument parsing) and
    by ``resolve_profile`` (a function's ``profile`` argument); nothing deeper reads ``$COURSE_PROFILE``."""
    import ast
    from pathlib import Path

    import course_lib

    entry_points = {"main", "config_from_args", "resolve_profile"}
    found = []
    for path in sorted(Path(course_lib.__file__).parent.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for fn in ast.walk(tree):
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and fn.name not in entry_points:
                found += [f"{path.name}:{n.lineno} ({fn.name})" for n in ast.walk(fn) if isinstance(n, ast.Call)
                          and getattr(n.func, "id", getattr(n.func, "attr", None)) == "get_profile"]
    assert not found, f"profile lookups below an entry point: {found}"


def test_profiles_module_reads_no_environment_at_import():
    import ast
    import inspect

    import course_lib.profiles as profiles

    tree = ast.parse(inspect.getsource(profiles))
    top_level_env = [n.lineno for stmt in tree.body if not isinstance(stmt, (ast.FunctionDef, ast.ClassDef))
                     for n in ast.walk(stmt) if isinstance(n, ast.Attribute) and n.attr == "environ"]
    assert not top_level_env, f"profiles.py reads os.environ at import (lines {top_level_env})"


def test_an_overrides_file_changes_the_profile_it_names_and_nothing_else(monkeypatch, tmp_path):
    """``$COURSE_PROFILE_OVERRIDES`` (the full-profile rehearsal's switch) names a JSON file of values."""
    import json

    from course_lib.profiles import OVERRIDES_ENV

    monkeypatch.delenv(OVERRIDES_ENV, raising=False)
    assert get_profile("full").drill.train_size == PROFILES["full"].drill.train_size
    path = tmp_path / "overrides.json"
    monkeypatch.setenv(OVERRIDES_ENV, str(path))
    with pytest.raises(FileNotFoundError, match="does not exist"):
        get_profile("full")
    path.write_text(json.dumps({"profile": "full", "sections": {"drill": {"train_size": 3, "gpu_memory_check": False}}}))
    full = get_profile("full")
    assert full.drill.train_size == 3 and full.drill.gpu_memory_check is False
    assert full.drill.eval_size == PROFILES["full"].drill.eval_size             # the rest as defined
    assert get_profile("ci").drill.train_size == PROFILES["ci"].drill.train_size   # another profile: untouched
    path.write_text(json.dumps({"profile": "full", "sections": {"drill": {"nope": 1}}}))
    with pytest.raises(ValueError, match="nope"):
        get_profile("full")


def test_a_resolved_profile_is_passed_down_as_it_is(monkeypatch):
    """``resolve_profile`` reads nothing again for a resolved profile; a name is resolved."""
    from course_lib.profiles import Profile, resolve_profile

    P = get_profile("ci")
    assert resolve_profile(P) is P
    assert resolve_profile("ci").name == "ci" and resolve_profile("full").name == "full"
    monkeypatch.setenv("COURSE_PROFILE", "full")             # read only when no profile is given
    assert resolve_profile(P) is P and resolve_profile(None).name == "full"
    assert isinstance(resolve_profile(None), Profile)


def test_a_profile_travels_to_a_spawned_process():
    """Step 3 sends the resolved profile to its spawned SFT workers: it pickles whole."""
    import pickle

    P = get_profile("full")
    Q = pickle.loads(pickle.dumps(P))
    assert Q == P and Q.sft.learning_rate == P.sft.learning_rate and Q.offline is False
