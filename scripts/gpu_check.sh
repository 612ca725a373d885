#!/usr/bin/env bash
# The full profile's drill (lesson 07) at toy size on one GPU, offline, with local model folders.
# Run `scripts/gpu_check.sh --help` for what it needs and does.
set -euo pipefail

usage() {
  cat <<'EOF'
usage: COURSE_SFT_MODEL=/path/to/Qwen2.5-0.5B-Instruct [COURSE_TEACHER_MODEL=/path/to/teacher] scripts/gpu_check.sh

Runs `python -m course_lib.drill --profile full` at toy size (32 train / 16 eval rows, 4 HumanEval
problems, 10 SFT steps, 4 RL steps in step 6) on one GPU without internet, then prints the metric tables
(output/drill_metrics.json) and the run manifest (output/run_manifest.json).

Step 6 (rl, lesson 10) runs when step 2 runs (it starts from pipeline SFT) and the TRL environment has
vLLM and a CUDA torch (TRL's colocated vLLM generation): create it, with the package index reachable, by
`$PYTHON -m course_lib.rl setup --full`. Otherwise the script says why and runs the drill with --no-rl.

Environment:
  COURSE_SFT_MODEL      required: local folder of the base model (config.json + weights)
  COURSE_TEACHER_MODEL  optional: local folder of step 2's teacher. Given: the script serves it with vLLM
                        on 127.0.0.1, runs steps 1-2, stops the server (one GPU: the teacher must be
                        stopped before SFT), then runs steps 3-5. Not given: --no-pipeline (raw SFT only).
  GPU_CHECK_ROOT        the drill's folders (default /tmp/course-gpu-check; removed first)
  PYTHON                the interpreter with `pip install -e .[full]` (default .venv/bin/python)
  TEACHER_PORT          the teacher's port (default 8011)

Data: the course's tiny-codes-shaped sample (assets/tiny_codes/), read with the full profile's code
path; the hub dataset needs internet and a token. Sandbox: Docker with the `python-sandbox` image (built
offline by `python -m course_lib.evaluation.sandbox image` when missing).
Exit status: 0 when every step ran; otherwise the first failure, with what is missing.
EOF
}

case "${1:-}" in
  -h|--help) usage; exit 0 ;;
  "") ;;
  *) echo "gpu_check: unknown argument $1 (see --help)" >&2; exit 2 ;;
esac

cd "$(dirname "${BASH_SOURCE[0]}")/.."
die() { echo "gpu_check: FAILED: $*" >&2; exit 1; }

PY="${PYTHON:-.venv/bin/python}"
[ -x "$PY" ] || PY="$(command -v python3 || true)"
[ -n "$PY" ] || die "no Python: set PYTHON=/path/to/python (the environment with \`pip install -e .[full]\`)"
[ -n "${COURSE_SFT_MODEL:-}" ] || die "COURSE_SFT_MODEL is not set: COURSE_SFT_MODEL=/path/to/Qwen2.5-0.5B-Instruct $0"
[ -f "$COURSE_SFT_MODEL/config.json" ] || die "COURSE_SFT_MODEL=$COURSE_SFT_MODEL has no config.json"
if [ -n "${COURSE_TEACHER_MODEL:-}" ]; then
  [ -f "$COURSE_TEACHER_MODEL/config.json" ] || die "COURSE_TEACHER_MODEL=$COURSE_TEACHER_MODEL has no config.json"
fi
command -v nvidia-smi >/dev/null || die "nvidia-smi not found: this check needs an NVIDIA GPU and its driver"
nvidia-smi --query-gpu=name,memory.free,memory.total --format=csv || die "nvidia-smi cannot read the GPU"
"$PY" -c "import vllm, torch; print('vllm', vllm.__version__, '| torch', torch.__version__, '| CUDA', torch.version.cuda)" \
  || die "vLLM does not import with $PY: install the GPU stack with \`$PY -m pip install -e .[full]\`"
"$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" \
  || die "torch.cuda.is_available() is False with $PY (a CPU build of torch? reinstall with \`pip install -e .[full]\`)"
"$PY" -m course_lib.evaluation.sandbox image \
  || die "no Docker daemon or no python-sandbox image (see the lines above; docs/sandbox.md)"

export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1
ROOT="${GPU_CHECK_ROOT:-/tmp/course-gpu-check}"
rm -rf "$ROOT"
ARGS=(--profile full --root "$ROOT" --sft-model "$COURSE_SFT_MODEL"
      --data-files assets/tiny_codes/tiny_codes_sample.jsonl --hidden-tests assets/tiny_codes/hidden_tests.jsonl
      --train-size 32 --eval-size 16 --humaneval-subset 4 --sft-steps 10)
# step 6: TRL's GRPOTrainer in the TRL environment with vLLM generation on the GPU (the full profile's rl section)
TRL_PY="$("$PY" -c "from course_lib.rl.trl_env import trl_python; print(trl_python()[0] or '')")"
if [ -n "$TRL_PY" ] && "$TRL_PY" -c "import trl, vllm, torch, sys; print('TRL env: trl', trl.__version__, '| vllm', vllm.__version__); sys.exit(0 if torch.cuda.is_available() else 1)"; then
  ARGS+=(--rl-steps 4)
else
  echo "gpu_check: step 6 (rl) skipped: the TRL environment (${TRL_PY:-missing}) lacks vLLM or a CUDA torch;" \
       "create it with \`$PY -m course_lib.rl setup --full\` (needs the package index)"
  ARGS+=(--no-rl)
fi

SERVER_PID=""
stop_teacher() {
  if [ -n "$SERVER_PID" ] && kill -0 "$SERVER_PID" 2>/dev/null; then
    echo "gpu_check: stopping the teacher (pid $SERVER_PID)"
    kill "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
  fi
  SERVER_PID=""
}
trap stop_teacher EXIT

t0=$(date +%s)
if [ -n "${COURSE_TEACHER_MODEL:-}" ]; then
  PORT="${TEACHER_PORT:-8011}"
  export COURSE_TEACHER_URL="http://127.0.0.1:$PORT/v1/"
  mkdir -p "$ROOT/logs"
  echo "gpu_check: serving the teacher $COURSE_TEACHER_MODEL on $COURSE_TEACHER_URL (log $ROOT/logs/teacher.log)"
  "$PY" -m vllm.entrypoints.openai.api_server --model "$COURSE_TEACHER_MODEL" --host 127.0.0.1 --port "$PORT" \
    --max-model-len 4096 --gpu-memory-utilization 0.8 >"$ROOT/logs/teacher.log" 2>&1 &
  SERVER_PID=$!
  for _ in $(seq 1 120); do
    "$PY" -c "from course_lib.training.teacher import teacher_is_up; import sys; sys.exit(0 if teacher_is_up('$COURSE_TEACHER_URL')[0] else 1)" \
      2>/dev/null && break
    kill -0 "$SERVER_PID" 2>/dev/null || { tail -20 "$ROOT/logs/teacher.log" >&2; die "the teacher server exited"; }
    sleep 5
  done
  "$PY" -c "from course_lib.training.teacher import teacher_is_up; import sys; sys.exit(0 if teacher_is_up('$COURSE_TEACHER_URL')[0] else 1)" \
    || { tail -20 "$ROOT/logs/teacher.log" >&2; die "the teacher did not answer within 10 minutes"; }
  "$PY" -m course_lib.drill "${ARGS[@]}" --pipeline-model "$COURSE_TEACHER_MODEL" --only-step 1,2 \
    || die "steps 1-2 (download, pipeline); the drill's log is under $ROOT/logs"
  stop_teacher
  sleep 5   # the driver releases the server's memory after the process exits
  "$PY" -m course_lib.drill "${ARGS[@]}" --pipeline-model "$COURSE_TEACHER_MODEL" --skip-steps 1,2 \
    || die "steps 3-5 (SFT, inference, evaluation); the drill's log is under $ROOT/logs"
else
  echo "gpu_check: no COURSE_TEACHER_MODEL: skipping step 2 (--no-pipeline: raw SFT only)"
  "$PY" -m course_lib.drill "${ARGS[@]}" --no-pipeline \
    || die "the drill; its log is under $ROOT/logs"
fi

echo
echo "=== output/drill_metrics.json ==="
"$PY" - "$ROOT/output/drill_metrics.json" <<'EOF'
import json, sys
from course_lib.drill import scoreboard
by_variant = json.load(open(sys.argv[1]))
print(scoreboard.table1(by_variant).to_string())
print()
print(scoreboard.table2(by_variant).to_string(float_format=lambda x: f"{x:.3f}"))
EOF
echo
echo "=== output/run_manifest.json ==="
cat "$ROOT/output/run_manifest.json"
echo
echo "gpu_check: passed in $(( $(date +%s) - t0 )) s; outputs under $ROOT"
