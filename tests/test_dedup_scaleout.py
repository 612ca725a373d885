"""Tests of course_lib.data.dedup_scaleout (lesson 02's datatrove section)."""
from __future__ import annotations

import random

import pytest

from course_lib.data import dedup, dedup_scaleout
from course_lib.tooling import environments


def test_missing_environment_is_reported_not_crashed(tmp_path):
    venv = tmp_path / "no-venv"
    status = environments.status("datatrove", venv)
    assert status["ready"] is False and "environments setup datatrove" in status["reason"]
    with pytest.raises(RuntimeError, match="no datatrove environment"):
        dedup_scaleout.run_datatrove_minhash(["x"], tmp_path / "work", venv=venv)


def test_venv_path_can_be_moved(monkeypatch, tmp_path):
    monkeypatch.setenv("COURSE_DATATROVE_VENV", str(tmp_path / "dt"))
    assert environments.venv_path("datatrove") == tmp_path / "dt"


def test_compare_removals():
    cmp = dedup_scaleout.compare_removals([[0, 1], [5, 6]], [[0, 1, 2]], [1, 6], [1, 2])
    assert cmp["removed_both"] == 1 and cmp["removed_only_ours"] == [6] and cmp["removed_only_theirs"] == [2]
    assert cmp["clustered_both"] == 2 and cmp["clustered_only_ours"] == [5, 6]
    assert cmp["clustered_only_theirs"] == [2]


@pytest.mark.slow
def test_datatrove_finds_planted_copies_when_its_environment_exists(tmp_path):
    status = environments.status("datatrove")
    if not status["ready"]:
        pytest.skip(status["reason"])
    rng = random.Random(0)
    base = ["\n".join(f"def f{i}_{k}(x):\n    return x * {rng.randrange(10**6)} + v{rng.randrange(10**6)}"
                      for k in range(30)) for i in range(40)]
    docs = base + [base[3], base[7].replace("return x", "return  x", 1)]
    result = dedup_scaleout.run_datatrove_minhash(docs, tmp_path / "work", tasks=2, workers=2)
    clustered = {i for c in result["clusters"] for i in c}
    assert {3, 40} <= clustered and {7, 41} <= clustered
    assert len(result["removed"]) == 2 and len(result["stage_seconds"]) == 4


def test_non_string_documents_get_a_clear_error():
    with pytest.raises(TypeError, match="document 1 is bytes"):
        dedup.find_near_duplicates(["a b c", b"a b c"])
