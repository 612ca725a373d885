"""``./course env``: what this machine offers the course (lesson 00 shows it).

Python version, the key packages against ``pyproject.toml``'s requirements, GPU or not, which sandbox
backends work, and where the caches are and how big they are. Every check reports; none raises.

Introduced in lesson 00.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
from dataclasses import asdict, dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from course_lib.paths import build_dir, cache_dir, repo_root

# The packages lesson 00 lists first (the rest of pyproject's dependencies are checked too).
KEY_PACKAGES = ("torch", "transformers", "datasets", "papermill", "nbconvert", "jupyterlab",
                "lazyllm", "datasketch", "networkx", "numpy", "tokenizers", "peft", "accelerate")


@dataclass
class PackageStatus:
    """One requirement of pyproject.toml and what is installed."""

    name: str
    required: str
    installed: str | None
    ok: bool
    extra: str = ""  # "" for base dependencies, else the extra's name


def _requirements(extras: tuple[str, ...] = ("dev",)) -> list[tuple[str, str, str]]:
    """(name, specifier, extra) from pyproject.toml (or the installed package metadata)."""
    from packaging.requirements import Requirement

    reqs: list[tuple[str, str]] = []
    root = repo_root()
    if root is not None:
        import tomllib

        project = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]
        reqs += [(r, "") for r in project.get("dependencies", [])]
        for extra in extras:
            reqs += [(r, extra) for r in project.get("optional-dependencies", {}).get(extra, [])]
    else:  # installed without the repository: read our own distribution's metadata
        for r in metadata.requires("course-lib") or []:
            req = Requirement(r)
            extra = ""
            if req.marker is not None:
                extra = next((e for e in extras if req.marker.evaluate({"extra": e})), None)
                if extra is None:
                    continue
            reqs.append((r.split(";")[0], extra))
    out = []
    for text, extra in reqs:
        req = Requirement(text)
        out.append((req.name, str(req.specifier), extra))
    return out


def check_packages(extras: tuple[str, ...] = ("dev",)) -> list[PackageStatus]:
    """Every requirement of pyproject.toml with the installed version and whether it satisfies it.

    Introduced in lesson 00."""
    from packaging.specifiers import SpecifierSet

    result = []
    for name, spec, extra in _requirements(extras):
        try:
            installed = metadata.version(name)
        except metadata.PackageNotFoundError:
            installed = None
        ok = installed is not None and SpecifierSet(spec).contains(installed, prereleases=True)
        result.append(PackageStatus(name, spec or "any", installed, ok, extra))
    return result


def check_gpu() -> dict[str, Any]:
    """Is there a CUDA GPU torch can use? (``nvidia-smi`` name and memory when present.)

    Introduced in lesson 00."""
    info: dict[str, Any] = {"cuda_available": False, "devices": [], "torch_cuda_build": None}
    try:
        import torch

        info["torch_cuda_build"] = torch.version.cuda
        info["cuda_available"] = bool(torch.cuda.is_available())
        if info["cuda_available"]:
            info["devices"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    except Exception as exc:  # torch missing or broken
        info["error"] = f"{type(exc).__name__}: {exc}"
    if not info["devices"] and shutil.which("nvidia-smi"):
        try:
            out = subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total", "--format=csv,noheader"],
                                 capture_output=True, text=True, timeout=10)
            info["nvidia_smi"] = out.stdout.strip().splitlines()
        except (OSError, subprocess.TimeoutExpired):
            pass
    return info


def check_sandbox() -> dict[str, Any]:
    """Which sandbox backends work (``course_lib.evaluation.sandbox.available_backends``) and which tools
    are installed. Introduced in lesson 00 (the sandbox itself: lesson 06)."""
    info: dict[str, Any] = {
        "tools": {"bwrap": shutil.which("bwrap"), "docker": shutil.which("docker"),
                  "dockerd": shutil.which("dockerd")},
        "backends": {},
    }
    from course_lib.evaluation.sandbox import available_backends  # lesson 06: {name: "ok" | reason}

    info["module"] = "course_lib.evaluation.sandbox"
    try:
        found = available_backends()
    except Exception as exc:   # a probe that crashes is a finding of the report, not the report's end
        info["backends"]["error"] = f"available_backends() failed: {type(exc).__name__}: {exc}"
        return info
    info["backends"] = {str(k): True if v == "ok" else str(v) for k, v in found.items()}
    return info


def _size_bytes(path: Path) -> int:
    total = 0
    for dirpath, _, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(dirpath, f)).st_size
            except OSError:
                pass
    return total


def human_size(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GB"  # pragma: no cover


def check_caches() -> dict[str, dict[str, Any]]:
    """The course cache (one folder per lesson artefact), the build folder and the Hugging Face cache,
    with their sizes. Introduced in lesson 00."""
    hf = Path(os.environ.get("HF_HOME", Path.home() / ".cache" / "huggingface"))
    places = {"course cache": cache_dir(create=False), "build": build_dir(create=False), "huggingface": hf}
    out: dict[str, dict[str, Any]] = {}
    for label, path in places.items():
        entry: dict[str, Any] = {"path": str(path), "exists": path.exists()}
        if path.exists():
            entry["bytes"] = _size_bytes(path)
            if label == "course cache":
                entry["parts"] = {p.name: _size_bytes(p) for p in sorted(path.iterdir()) if p.is_dir()}
        out[label] = entry
    return out


def collect_environment(*, sandbox: bool = True) -> dict[str, Any]:
    """Everything :func:`format_report` prints, as a dict. Introduced in lesson 00."""
    packages = check_packages()
    gpu = check_gpu()
    return {
        "python": {"version": platform.python_version(), "executable": sys.executable,
                   "ok": sys.version_info[:2] == (3, 11)},
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "packages": [asdict(p) for p in packages],
        "gpu": gpu,
        "sandbox": check_sandbox() if sandbox else {"module": "not checked"},
        "caches": check_caches(),
        "profile_hint": "full" if gpu["cuda_available"] else "ci",
    }


def _shown_path(path: Any) -> str:
    """A path as the report prints it: relative to the checkout or ``~`` when it lies there, so that a
    notebook's output holds no absolute local path."""
    p = Path(str(path))
    for base, label in ((repo_root(), "."), (Path.home(), "~")):
        if base is None:
            continue
        try:
            return str(Path(label) / p.resolve().relative_to(Path(base).resolve()))
        except ValueError:
            continue
    return str(path)


def format_report(env: dict[str, Any], all_packages: bool = False) -> str:
    """A short human-readable report of :func:`collect_environment`. Introduced in lesson 00."""
    lines = []
    py = env["python"]
    lines.append(f"Python {py['version']} ({_shown_path(py['executable'])})" + ("" if py["ok"] else "  ✗ the course needs 3.11"))
    lines.append(f"{env['platform']}, {env['cpus']} CPU(s)")
    pk = env["packages"]
    bad = [p for p in pk if not p["ok"]]
    shown = pk if all_packages else [p for p in pk if p["name"].lower() in KEY_PACKAGES] + \
        [p for p in bad if p["name"].lower() not in KEY_PACKAGES]
    lines.append(f"packages: {len(pk) - len(bad)}/{len(pk)} satisfy pyproject.toml")
    for p in shown:
        mark = "✓" if p["ok"] else "✗"
        lines.append(f"  {mark} {p['name']:<22} {p['installed'] or 'missing':<14} needs {p['required']}"
                     + (f"  [{p['extra']}]" if p["extra"] else ""))
    gpu = env["gpu"]
    if gpu["cuda_available"]:
        lines.append(f"GPU: {', '.join(gpu['devices'])} → the full profile can run")
    else:
        lines.append("GPU: none visible to torch → use the ci profile (CPU)"
                     + (f"; nvidia-smi sees {gpu['nvidia_smi']}" if gpu.get("nvidia_smi") else ""))
    sb = env["sandbox"]
    lines.append(f"sandbox: {sb.get('module')}")
    for name, state in sb.get("backends", {}).items():
        lines.append(f"  {'✓' if state is True else '✗'} {name}" + ("" if state is True else f": {state}"))
    tools = sb.get("tools", {})
    if tools:
        lines.append("  tools on PATH: " + ", ".join(f"{k}={'yes' if v else 'no'}" for k, v in tools.items()))
    lines.append("caches:")
    for label, c in env["caches"].items():
        size = human_size(c["bytes"]) if c.get("exists") else "not created yet"
        lines.append(f"  {label:<13} {size:>14}  {_shown_path(c['path'])}")
        for part, n in (c.get("parts") or {}).items():
            lines.append(f"      {part:<24} {human_size(n):>10}")
    lines.append(f"suggested profile: {env['profile_hint']}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """``./course env [--json] [--all] [--no-sandbox]``. Exit 1 when a base requirement is unmet."""
    p = argparse.ArgumentParser(prog="course env", description=__doc__.split("\n\n")[0])
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument("--all", action="store_true", help="list every package, not just the key ones")
    p.add_argument("--no-sandbox", action="store_true", help="skip the sandbox probe")
    args = p.parse_args(argv)
    env = collect_environment(sandbox=not args.no_sandbox)
    print(json.dumps(env, indent=1, ensure_ascii=False) if args.json else format_report(env, args.all))
    base_bad = [x for x in env["packages"] if not x["ok"] and not x["extra"]]
    return 1 if base_bad or not env["python"]["ok"] else 0
