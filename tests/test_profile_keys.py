"""Profiles are the single source of settings: every key of every section is read somewhere.

A key is "read" when some code outside ``profiles.py`` (course_lib, lessons, benchmarks, scripts) names
it as an attribute (``cfg.threshold``), a subscript (``cfg["threshold"]``) or through ``.get("...")``,
or reads a family of keys through their prefix (``d[f"vllm_{k}"]`` for the fields ``k`` of a dataclass).
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from course_lib.profiles import PROFILES

ROOT = Path(__file__).resolve().parent.parent
SOURCES = [p for d in ("course_lib", "lessons", "benchmarks", "scripts") for p in (ROOT / d).rglob("*.py")
           if p.name != "profiles.py"]
TEXT = "\n".join(p.read_text(encoding="utf-8") for p in SOURCES)


def _keys():
    for prof in PROFILES.values():
        for section, values in prof.sections.items():
            for key in values:
                yield section, key


def _named(k: str) -> bool:
    return re.search(rf"\.{k}\b|\[\s*[\"']{k}[\"']\s*\]|get\(\s*[\"']{k}[\"']", TEXT) is not None


def _read(key: str) -> bool:
    if _named(re.escape(key)):
        return True
    # a family of keys read through a prefix: d[f"vllm_{k}"] for the fields of a dataclass
    prefix, _, rest = key.partition("_")
    return bool(rest) and re.search(rf"f[\"']{re.escape(prefix)}_\{{", TEXT) is not None and re.search(
        rf"\b{re.escape(rest)}\s*:", TEXT) is not None


@pytest.mark.parametrize("section,key", sorted(set(_keys())))
def test_profile_key_is_read_somewhere(section, key):
    assert _read(key), (f"profile key {section}.{key} is read nowhere in course_lib, lessons, benchmarks "
                        "or scripts: remove it from course_lib/profiles.py or use it")


def test_both_profiles_have_the_same_sections_and_keys():
    ci, full = PROFILES["ci"], PROFILES["full"]
    assert set(ci.sections) == set(full.sections)
    for name in ci.sections:
        assert set(ci.sections[name]) == set(full.sections[name]), name
