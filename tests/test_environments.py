"""The course's side environments: one list, one setup command, clear reasons when one is missing."""
from __future__ import annotations

from pathlib import Path

import pytest

from course_lib.tooling import environments

REPO = Path(__file__).resolve().parents[1]


def test_every_side_environment_has_a_venv_a_probe_and_a_reason(monkeypatch, tmp_path):
    assert {"vllm", "datatrove"} <= set(environments.ENVIRONMENTS)
    ignored = (REPO / ".gitignore").read_text().splitlines()
    for name, env in environments.ENVIRONMENTS.items():
        assert env.requirements and env.probe and env.why and env.used_by, name
        assert ".venv-*/" in ignored, name                  # every side environment, this one and the next
        monkeypatch.setenv(env.env_var, str(tmp_path / name))
        assert environments.venv_path(name) == tmp_path / name
        st = environments.status(name)
        assert not st["ready"] and f"python -m course_lib.tooling.environments setup {name}" in st["reason"]
        python, why = environments.python_for(name)
        assert python is None and str(tmp_path / name) in why


def test_an_unknown_environment_names_the_known_ones():
    with pytest.raises(ValueError, match="vllm"):
        environments.venv_path("nope")


def test_setup_sh_builds_all_of_them_with_the_one_command():
    setup = (REPO / "scripts" / "setup.sh").read_text()
    assert "-m course_lib.tooling.environments setup" in setup
    assert "vllm_engine setup" not in setup and "dedup_scaleout setup" not in setup   # one place


def test_the_course_venv_does_not_leak_into_a_side_environment():
    env = environments.clean_environ({"PYTHONPATH": "/x", "VIRTUAL_ENV": "/v", "HOME": "/h"})
    assert env == {"HOME": "/h"}


def test_the_course_venv_is_pinned_so_the_ci_corpus_is_the_same_everywhere():
    """setup.sh installs the course venv under scripts/constraints.txt: the ci corpus is the installed
    distributions' source, so an unpinned release would change the tiny model and every number after it."""
    import re
    import tomllib

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    setup = (REPO / "scripts" / "setup.sh").read_text()
    assert 'PINS=(-c "$ROOT/scripts/constraints.txt")' in setup
    assert re.search(r'install -e "\$ROOT\[dev\]" "\$\{PINS\[@\]\}"', setup)
    lines = [ln for ln in (REPO / "scripts" / "constraints.txt").read_text().splitlines() if ln and not ln.startswith("#")]
    bad = [ln for ln in lines if not re.fullmatch(r"[A-Za-z0-9_.\-]+==[A-Za-z0-9_.+\-!]+", ln)]
    assert not bad, f"scripts/constraints.txt: lines that are not name==version: {bad[:5]}"
    pinned = {canonicalize_name(ln.split("==")[0]): ln.split("==")[1] for ln in lines}
    assert "torch" not in pinned and {"pip", "setuptools", "lxml"} <= set(pinned)
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    wanted = [Requirement(r) for r in project["dependencies"] + project["optional-dependencies"]["dev"]]
    for req in wanted:
        name = canonicalize_name(req.name)
        if name == "torch":
            continue
        assert name in pinned, f"{req.name} is a dependency but scripts/constraints.txt does not pin it: regenerate it"
        assert req.specifier.contains(pinned[name], prereleases=True), \
            f"scripts/constraints.txt pins {req.name}=={pinned[name]}, outside pyproject.toml's {req.specifier}"
