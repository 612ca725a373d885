"""Packaging: pyproject.toml and environment.yml agree; the package and its commands import."""
from __future__ import annotations

import re
import subprocess
import sys
import tomllib

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name

# Things conda installs that are not Python dependencies of course_lib.
CONDA_ONLY = {"python", "pip", "nodejs"}
# conda-forge names that differ from PyPI names.
CONDA_ALIASES = {"pytorch": "torch", "pyyaml": "pyyaml"}


@pytest.fixture(scope="module")
def project(repo):
    return tomllib.loads((repo / "pyproject.toml").read_text(encoding="utf-8"))["project"]


@pytest.fixture(scope="module")
def pyproject_reqs(project) -> dict[str, Requirement]:
    reqs = [Requirement(r) for r in project["dependencies"]]
    reqs += [Requirement(r) for r in project.get("optional-dependencies", {}).get("dev", [])]
    return {canonicalize_name(r.name): r for r in reqs}


@pytest.fixture(scope="module")
def env_yml(repo) -> dict:
    return yaml.safe_load((repo / "environment.yml").read_text(encoding="utf-8"))


def _conda_spec(text: str) -> tuple[str, str]:
    """'numpy>=1.26,<2' / 'python=3.11' / 'nodejs' → (name, PEP 440 specifier)."""
    m = re.match(r"^\s*([A-Za-z0-9_.\-]+)\s*(.*)$", text)
    name, spec = m.group(1), m.group(2).replace(" ", "")
    if re.match(r"^=\d", spec):           # conda's `=3.11` means 3.11.*
        spec = f"=={spec[1:]}.*" if spec.count(".") < 2 else f"=={spec[1:]}"
    return name, spec


def _env_packages(env_yml) -> tuple[dict[str, str], list[str]]:
    """({name: specifier} of everything environment.yml names, raw pip lines)."""
    named: dict[str, str] = {}
    pip_lines: list[str] = []
    for dep in env_yml["dependencies"]:
        if isinstance(dep, dict):
            pip_lines += dep.get("pip", [])
            continue
        name, spec = _conda_spec(str(dep))
        named[CONDA_ALIASES.get(name.lower(), name.lower())] = spec
    for line in pip_lines:
        if line.startswith("-"):
            continue
        req = Requirement(line)
        named[canonicalize_name(req.name)] = str(req.specifier)
    return named, pip_lines


def test_environment_uses_conda_forge_and_python_311(env_yml, project):
    assert env_yml["channels"] == ["conda-forge"]
    named, _ = _env_packages(env_yml)
    assert SpecifierSet(named["python"]).contains("3.11.7")
    assert SpecifierSet(project["requires-python"]).contains("3.11.7")


def test_environment_installs_the_package_with_its_dev_extra(env_yml):
    _, pip_lines = _env_packages(env_yml)
    editable = [ln for ln in pip_lines if ln.startswith("-e")]
    assert editable, "environment.yml must install the course with `-e .[dev]` in its pip section"
    assert re.fullmatch(r"-e\s+\.\[([a-z,]*\b)?dev(\b[a-z,]*)?\]", editable[0]), editable[0]


def test_every_package_in_environment_yml_agrees_with_pyproject(env_yml, pyproject_reqs):
    named, _ = _env_packages(env_yml)
    problems = []
    for name, spec in named.items():
        if name in CONDA_ONLY:
            continue
        req = pyproject_reqs.get(canonicalize_name(name))
        if req is None:
            problems.append(f"{name} is in environment.yml but not in pyproject.toml's dependencies/dev")
            continue
        pins = [s.version for s in SpecifierSet(spec) if s.operator == "=="]
        for pin in pins:
            if not req.specifier.contains(pin, prereleases=True):
                problems.append(f"{name}: environment.yml pins {pin}, pyproject.toml wants {req.specifier}")
    assert not problems, "\n".join(problems)


def test_torch_requirement_admits_the_local_cpu_build(pyproject_reqs):
    assert pyproject_reqs["torch"].specifier.contains("2.13.0")


def test_extras_exist(project):
    extras = project["optional-dependencies"]
    assert {"dev", "full"} <= set(extras)
    assert any(Requirement(r).name == "pytest" for r in extras["dev"])
    assert any(Requirement(r).name == "vllm" for r in extras["full"])


def test_no_loose_exact_pins_on_fast_moving_libraries(pyproject_reqs):
    for name in ("jupyterlab", "papermill", "nbconvert", "matplotlib", "tqdm", "networkx"):
        if name in pyproject_reqs:
            assert not any(s.operator == "==" for s in pyproject_reqs[name].specifier), name


def test_slides_template_ships_with_the_package(repo):
    assert (repo / "course_lib" / "tooling" / "templates" / "course_reveal" / "index.html.j2").exists()


@pytest.mark.parametrize("module", ["course_lib", "course_lib.tooling.runner", "course_lib.tooling.slides",
                                    "course_lib.tooling.envcheck", "course_lib.tooling.nbtools", "course_lib.tooling.codestats",
                                    "course_lib.tooling.coursemap"])
def test_skeleton_modules_import(module):
    __import__(module)


def test_course_command_lists_its_commands(repo):
    out = subprocess.run([sys.executable, "-m", "course_lib", "--help"], cwd=repo, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0
    listed = [line.split()[0] for line in out.stdout.split("commands:")[1].splitlines() if line.strip()]
    assert {"run", "test", "slides", "env", "notebooks", "drill"} <= set(listed)
    assert "student" not in listed          # the old alias of `notebooks` is gone


def test_licence_file_matches_pyproject(repo, project):
    assert project["license"] == "MIT"
    assert "LICENSE" in project.get("license-files", [])
    assert (repo / "LICENSE").read_text(encoding="utf-8").startswith("MIT License")


def test_setuptools_floor_supports_the_licence_fields(repo):
    build = tomllib.loads((repo / "pyproject.toml").read_text(encoding="utf-8"))["build-system"]
    floor = [Requirement(r) for r in build["requires"] if Requirement(r).name == "setuptools"][0]
    # a plain SPDX string in `license` and `license-files` need setuptools 77 (PEP 639)
    assert not floor.specifier.contains("76.9"), floor


def test_console_script_course_points_at_the_cli(project):
    assert project["scripts"]["course"] == "course_lib.tooling.cli:main"


# Declared dependencies that no `import` in the repository names, and why they are needed.
NEEDED_WITHOUT_IMPORT = {
    "jupyterlab": "`./course lab`", "ipykernel": "the course's Jupyter kernel", "ipywidgets": "progress widgets",
    "pyarrow": "version cap for datasets with numpy 1.x", "tokenizers": "transformers' fast tokenizers",
    "peft": "LLaMA-Factory (LoRA)", "accelerate": "LLaMA-Factory / transformers Trainer",
    "lazyllm-llamafactory": "`llamafactory-cli`, run by LazyLLM's finetune.llamafactory",
    # lazyllm.tools.data imports these (LazyLLM's `rag` group)
    "regex": "lazyllm.tools.data", "fsspec": "lazyllm.tools.data", "pypdf": "lazyllm.tools.data",
    "docx2txt": "lazyllm.tools.data", "ebooklib": "lazyllm.tools.data", "html2text": "lazyllm.tools.data",
    "olefile": "lazyllm.tools.data", "openpyxl": "lazyllm.tools.data", "python-pptx": "lazyllm.tools.data",
    "python-docx": "lazyllm.tools.data", "beautifulsoup4": "lazyllm.tools.data", "tiktoken": "lazyllm.tools.data",
    "spacy": "lazyllm.tools.data", "bm25s": "lazyllm.tools.data", "pystemmer": "lazyllm.tools.data",
    "nltk": "lazyllm.tools.data", "jieba": "lazyllm.tools.data", "sentencepiece": "lazyllm.tools.data",
    "psycopg2-binary": "lazyllm.tools.data", "sqlalchemy": "lazyllm.tools.data",
    "python-multipart": "lazyllm.tools.data", "json-repair": "lazyllm.tools.data",
    "pytest-timeout": "pytest plugin", "jupytext": "imported lazily by nbtools",
    "ruff": "run by tests/test_style.py", "pyyaml": "imported as yaml",
}
# Files that run in their own environment (not .venv) and may import what only that one has.
OWN_ENVIRONMENT = ("course_lib/data/scripts/", "course_lib/rl/scripts/")


def _third_party_imports(repo) -> dict[str, set[str]]:
    import ast

    found: dict[str, set[str]] = {}
    for folder in ("course_lib", "tests", "lessons", "benchmarks"):
        for path in (repo / folder).rglob("*.py"):
            rel = str(path.relative_to(repo))
            if rel.startswith(OWN_ENVIRONMENT):
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                names = []
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                    names = [node.module]
                for n in names:
                    top = n.split(".")[0]
                    if top not in sys.stdlib_module_names and top not in ("course_lib", "tests", "__future__"):
                        found.setdefault(top, set()).add(rel)
    return found


def test_every_imported_package_is_declared_and_every_declared_one_is_needed(repo, project):
    import importlib.metadata as md

    dist_of = md.packages_distributions()
    declared = {canonicalize_name(Requirement(r).name)
                for r in project["dependencies"] + [x for v in project["optional-dependencies"].values() for x in v]}
    imported = _third_party_imports(repo)
    undeclared = {}
    used = set()
    for top, files in imported.items():
        dists = {canonicalize_name(d) for d in dist_of.get(top, [])}
        if not dists:
            continue  # not installed here (a full-profile package behind a guard): checked by the extras
        used |= dists
        if not dists & declared:
            undeclared[top] = sorted(files)[:3]
    assert not undeclared, f"imported but not declared in pyproject.toml: {undeclared}"
    unused = sorted(declared - used - {canonicalize_name(n) for n in NEEDED_WITHOUT_IMPORT}
                    - {canonicalize_name(Requirement(r).name) for r in project["optional-dependencies"].get("full", [])}
                    - {"pytest", "torch"})
    assert not unused, f"declared in pyproject.toml but never imported (or say why in NEEDED_WITHOUT_IMPORT): {unused}"


def test_ci_lints_first_then_runs_the_readme_test_command(repo):
    """``.ci/run``: ruff first (fails fast, before the long tests), then exactly the README's command."""
    lines = [ln.strip() for ln in (repo / ".ci" / "run").read_text(encoding="utf-8").splitlines()
             if ln.strip() and not ln.strip().startswith("#")]
    ruff = next(i for i, ln in enumerate(lines) if "ruff" in ln and "check" in ln)
    test = lines.index("./course test")
    assert ruff < test
    assert "./course test    # the whole test suite" in (repo / "README.md").read_text(encoding="utf-8")
