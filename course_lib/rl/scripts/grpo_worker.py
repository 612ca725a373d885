"""TRL's GRPOTrainer on one model: ``python -P grpo_worker.py JOB.json`` (the TRL environment's interpreter).

Started by :func:`course_lib.rl.trainer.train_grpo`. It imports only TRL, its dependencies and the
standard library (the TRL environment has no course package). The job holds the model folder, the
prompts (text and key), TRL's ``GRPOConfig`` keyword arguments, the torch thread count and where to save.

The rewards are not computed here. The reward function TRL calls sends the batch's completions and
prompt keys to the parent as one JSON line on this process's original standard output and reads the
rewards back from standard input; the parent judges them in the course sandbox. Anything else this
process prints goes to standard error (fd 1 is pointed at fd 2 before TRL is imported), so nothing
printed can be taken for a message. Per optimisation step the TRL log record is sent the same way
(``{"op": "log"}``, no answer), and at the end ``{"op": "done"}`` after the weights are saved.

Exit codes: 0 done; 3 ``import trl`` failed (the message is on stderr); anything else: training failed
(the traceback is on stderr).
"""
import json
import os
import sys
import time


class Channel:
    """One JSON line per message to the parent; ``ask`` waits for its one-line answer."""

    def __init__(self):
        self.out = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8")
        os.dup2(2, 1)                                  # prints from here on go to stderr
        sys.stdout = sys.stderr
        self.inp = sys.stdin

    def tell(self, msg: dict) -> None:
        self.out.write(json.dumps(msg) + "\n")
        self.out.flush()

    def ask(self, msg: dict) -> dict:
        self.tell(msg)
        line = self.inp.readline()
        if not line:
            raise SystemExit("the parent closed the channel")
        reply = json.loads(line)
        if "error" in reply:
            raise SystemExit(f"the parent could not judge the rollouts: {reply['error']}")
        return reply


def die_with_parent() -> None:
    """Linux: end this process when the parent that judges its rollouts ends (PR_SET_PDEATHSIG)."""
    try:
        import ctypes
        import signal

        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGTERM))
    except (OSError, AttributeError):
        return
    if os.getppid() == 1:
        raise SystemExit("the parent is gone")


class Clock:
    """Wall and CPU seconds spent inside the wrapped methods since the last ``take()``."""

    def __init__(self):
        self.wall = self.cpu = 0.0

    def wrap(self, fn):
        def timed(*args, **kwargs):
            w, c = time.monotonic(), time.process_time()
            try:
                return fn(*args, **kwargs)
            finally:
                self.wall += time.monotonic() - w
                self.cpu += time.process_time() - c
        return timed

    def take(self) -> tuple[float, float]:
        out, self.wall, self.cpu = (self.wall, self.cpu), 0.0, 0.0
        return out


def main(job_path: str) -> int:
    die_with_parent()
    with open(job_path, encoding="utf-8") as f:
        job = json.load(f)
    chan = Channel()
    t0 = time.monotonic()
    try:
        import torch
        import transformers
        import trl
        from datasets import Dataset
        from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
        from trl import GRPOConfig, GRPOTrainer
    except Exception as exc:  # an ImportError, or a broken build raising at import
        print(f"IMPORT-ERROR: import trl failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 3
    torch.set_num_threads(int(job["threads"]))
    torch.manual_seed(int(job["trl"]["seed"]))
    t_import = time.monotonic() - t0

    tok = AutoTokenizer.from_pretrained(job["model_dir"])
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    dtype = torch.bfloat16 if job["trl"].get("bf16") and not job["trl"].get("use_cpu") else torch.float32
    model = AutoModelForCausalLM.from_pretrained(job["model_dir"], dtype=dtype)
    data = Dataset.from_list([{"prompt": p["text"], "key": p["key"]} for p in job["prompts"]])

    def sandbox_judge(prompts, completions, key, **kwargs):
        reply = chan.ask({"op": "score", "keys": list(key), "completions": list(completions)})
        return [None if r is None else float(r) for r in reply["rewards"]]

    generation = Clock()      # rollouts: the trainer's generate calls (judging excluded: the parent times it)

    class Relay(TrainerCallback):
        def on_log(self, args, state, control, logs=None, **kwargs):
            logs = {k: v for k, v in (logs or {}).items() if isinstance(v, (int, float)) or v is None}
            gen_wall, gen_cpu = generation.take()
            chan.tell({"op": "log", "step": int(state.global_step), "logs": logs, "cpu_s": time.process_time(),
                       "wall_s": time.monotonic() - t0, "generate_s": gen_wall, "generate_cpu_s": gen_cpu})

    args = GRPOConfig(**job["trl"])
    trainer = GRPOTrainer(model=model, reward_funcs=sandbox_judge, args=args, train_dataset=data,
                          processing_class=tok, callbacks=[Relay()])
    if hasattr(trainer, "_generate"):
        trainer._generate = generation.wrap(trainer._generate)
    t_ready = time.monotonic() - t0
    chan.tell({"op": "ready", "wall_s": t_ready, "cpu_s": time.process_time()})
    trainer.train()
    t_train = time.monotonic() - t0 - t_ready
    trainer.model.save_pretrained(job["save_dir"])
    chan.tell({"op": "done", "versions": {"trl": trl.__version__, "transformers": transformers.__version__,
                                          "torch": torch.__version__},
               "seconds": {"import": round(t_import, 2), "ready": round(t_ready, 2), "train": round(t_train, 2),
                           "total": round(time.monotonic() - t0, 2)},
               "cpu_s": time.process_time(), "threads": torch.get_num_threads()})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
