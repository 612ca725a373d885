"""One vLLM engine for one model: ``python -P vllm_worker.py JOB.json OUT.json`` (vLLM's interpreter).

Started by :func:`course_lib.evaluation.vllm_engine.generate_offline`. After the first job the worker reads
standard input: each line ``NEXT.json NEXT_OUT.json`` is one more round of prompts for the same engine
(the parent builds them from the first round's answers); end of input ends the process.
It imports only vLLM and the standard library, because the vLLM environment has no course package. The
job holds ``engine_args`` for ``vllm.LLM``, the prompts as token ids (the course tokenizes them, so both
engines read the same ids), ``stop_token_ids`` and ``max_tokens``; the output holds each answer's token
ids and finish reason, vLLM's version, the device, and the seconds spent starting the engine and
generating. Greedy decoding, or sampling with one seed per prompt (``sampling`` in the job).

Exit codes: 0 done; 3 ``import vllm`` failed (the message is on stderr); anything else: the engine failed
(its traceback is on stderr). The process exits after one model, which frees the engine's memory.
"""
import json
import os
import sys
import time


def main(job_path: str, out_path: str) -> int:
    with open(job_path, encoding="utf-8") as f:
        job = json.load(f)
    t0 = time.monotonic()
    try:
        import vllm
        from vllm import LLM, SamplingParams
    except Exception as exc:  # an ImportError, or a broken CUDA/torch build raising at import
        print(f"IMPORT-ERROR: import vllm failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 3
    t_import = time.monotonic() - t0
    llm = LLM(**job["engine_args"])
    t_start = time.monotonic() - t0
    try:
        from vllm.platforms import current_platform
        device = str(current_platform.device_type)
    except Exception:  # the report's device field is informative only
        device = "unknown"

    seconds = {"import": round(t_import, 2), "start": round(t_start, 2)}
    while True:
        t1 = time.monotonic()
        answers = generate(llm, SamplingParams, job)
        seconds["generate"] = round(time.monotonic() - t1, 2)
        write_atomic(out_path, {"answers": answers, "vllm_version": vllm.__version__, "device": device,
                                "seconds": seconds})
        line = sys.stdin.readline()            # the next round, or end of input
        if not line.strip():
            return 0
        job_path, out_path = line.split()
        with open(job_path, encoding="utf-8") as f:
            job = json.load(f)
        seconds = {}


def generate(llm, SamplingParams, job: dict) -> list[dict]:
    """Answers (token ids and finish reason) to the job's prompts: greedy, or sampled when the job holds
    ``sampling`` = {"temperature", "top_p", "seeds": one seed per prompt} (a repeated prompt with its own
    seed is one more sample)."""
    params = SamplingParams(temperature=0.0, max_tokens=int(job["max_tokens"]),
                            stop_token_ids=list(job["stop_token_ids"]), detokenize=False, seed=0)
    sampling = job.get("sampling")
    if sampling:
        params = [SamplingParams(temperature=float(sampling["temperature"]), top_p=float(sampling.get("top_p", 1.0)),
                                 max_tokens=int(job["max_tokens"]), stop_token_ids=list(job["stop_token_ids"]),
                                 detokenize=False, seed=int(seed)) for seed in sampling["seeds"]]
    if not job["prompt_token_ids"]:
        return []
    outs = llm.generate([{"prompt_token_ids": ids} for ids in job["prompt_token_ids"]], params, use_tqdm=False)
    return [{"token_ids": list(r.outputs[0].token_ids), "finish_reason": r.outputs[0].finish_reason} for r in outs]


def write_atomic(path: str, data: dict) -> None:
    """Write ``data`` as JSON to ``path`` in one rename, so the parent never reads half a file. A copy of
    :func:`course_lib.store.atomic_write_text`'s pattern because this script runs in vLLM's interpreter,
    which has no course package to import."""
    with open(path + ".part", "w", encoding="utf-8") as f:
        json.dump(data, f)
    os.replace(path + ".part", path)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
