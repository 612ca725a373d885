"""The two profiles: same shape, clear errors, the environment default."""
from __future__ import annotations

import pytest

from course_lib import PROFILES, get_profile
from course_lib.profiles import recommend_profile


def test_both_profiles_exist():
    assert set(PROFILES) == {"ci", "full"}
    assert get_profile("ci").device == "cpu"
    assert get_profile("full").device == "cuda"


def test_profiles_have_the_same_sections_and_keys():
    ci, full = PROFILES["ci"], PROFILES["full"]
    assert set(ci.sections) == set(full.sections)
    for name in ci.sections:
        assert set(ci.sections[name]) == set(full.sections[name]), f"section {name!r} differs"


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
