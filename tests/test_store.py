"""The artefact store: keys from config + upstream + code, atomic publication, completion markers."""
from __future__ import annotations

import json
import os
import threading

import pytest

from course_lib import store


def _writer(text):
    def build(folder):
        (folder / "data.txt").write_text(text)
        return {"rows": len(text)}
    return build


def test_builds_once_then_reads_the_cache(tmp_path):
    calls = []

    def build(folder):
        calls.append(1)
        (folder / "x").write_text("1")
        return {"n": 1}

    a = store.get_or_build("s", "thing", {"k": 1}, build, root=tmp_path)
    b = store.get_or_build("s", "thing", {"k": 1}, build, root=tmp_path)
    assert a.built and not b.built and len(calls) == 1
    assert a.path == b.path and (b.path / "x").read_text() == "1"
    assert b.meta["n"] == 1 and store.fingerprint(b.path) == b.key


def test_key_changes_with_config_upstream_and_code(tmp_path):
    src = tmp_path / "mod.py"
    src.write_text("A = 1\n")
    k0 = store.artefact_key({"a": 1}, upstream=["u1"], code=[src])
    assert store.artefact_key({"a": 2}, upstream=["u1"], code=[src]) != k0
    assert store.artefact_key({"a": 1}, upstream=["u2"], code=[src]) != k0
    src.write_text("A = 2\n")
    assert store.artefact_key({"a": 1}, upstream=["u1"], code=[src]) != k0


def test_failed_build_leaves_no_artefact_and_no_temp(tmp_path):
    def boom(folder):
        (folder / "half").write_text("x")
        raise RuntimeError("builder failed")

    with pytest.raises(RuntimeError, match="builder failed"):
        store.get_or_build("s", "thing", {}, boom, root=tmp_path)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("marker", ["[]", "null", "{}", "not json", '{"key": 3}'])
def test_malformed_marker_means_rebuild(tmp_path, marker):
    a = store.get_or_build("s", "thing", {}, _writer("a"), root=tmp_path)
    (a.path / store.MARKER).write_text(marker)
    assert not store.is_complete(a.path)
    b = store.get_or_build("s", "thing", {}, _writer("b"), root=tmp_path)
    assert b.built and (b.path / "data.txt").read_text() == "b"


def test_rebuild_replaces_atomically_with_no_missing_folder_window(tmp_path):
    a = store.get_or_build("s", "thing", {}, _writer("old"), root=tmp_path)
    seen_missing = []
    stop = threading.Event()

    def reader():
        while not stop.is_set():
            p = a.path / "data.txt"
            try:
                p.read_text()
            except FileNotFoundError:
                seen_missing.append(1)

    t = threading.Thread(target=reader)
    t.start()
    try:
        for i in range(30):
            store.get_or_build("s", "thing", {}, _writer(f"v{i}"), root=tmp_path, rebuild=True)
    finally:
        stop.set()
        t.join()
    assert not seen_missing
    assert (a.path / "data.txt").read_text() == "v29"
    # old versions are cleaned up: the link, the current and the previous version folder remain
    assert len([p for p in tmp_path.iterdir() if not p.name.startswith(".")]) == 3


def test_a_plain_folder_from_before_is_replaced(tmp_path):
    key = store.artefact_key({})
    plain = tmp_path / f"thing-{key}"
    plain.mkdir()
    (plain / "data.txt").write_text("old, no marker")
    b = store.get_or_build("s", "thing", {}, _writer("new"), root=tmp_path)
    assert b.built and os.path.islink(b.path) and (b.path / "data.txt").read_text() == "new"


def test_fingerprint_of_an_incomplete_folder_says_what_to_do(tmp_path):
    with pytest.raises(FileNotFoundError, match="build it first"):
        store.fingerprint(tmp_path)
    (tmp_path / store.MARKER).write_text(json.dumps({"key": "abc"}))
    assert store.fingerprint(tmp_path) == "abc"
