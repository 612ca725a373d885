"""The deprecated alias modules (kept for one release after a rename) warn on import and hand out the very
objects of the module they point to."""
from __future__ import annotations

import importlib
import sys

import pytest

# old module → new module
ALIASES = {
    "course_lib.drill.rl": "course_lib.rl.drill_step",
    "course_lib.drill.run": "course_lib.drill.orchestrate",
    "course_lib.drill.settings": "course_lib.drill.config",
}


@pytest.mark.parametrize("old,new", sorted(ALIASES.items()))
def test_alias_warns_and_reexports(old, new, monkeypatch):
    monkeypatch.delitem(sys.modules, old, raising=False)
    with pytest.warns(DeprecationWarning, match=new.replace(".", r"\.")):
        alias = importlib.import_module(old)
    target = importlib.import_module(new)
    assert alias.__all__
    for name in alias.__all__:
        assert getattr(alias, name) is getattr(target, name), name
