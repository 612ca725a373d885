"""The settings of the RL step: one frozen dataclass, with the ci and full values in one place.

:class:`RLSettings` holds everything :func:`course_lib.rl.trainer.train_grpo` needs: the group-relative
algorithm's knobs in TRL's own vocabulary (``num_generations`` is the KAT notes' K, ``epsilon`` /
``epsilon_high`` the two clip sides, ``beta`` the KL weight, ``loss_type`` the aggregation), the reward,
the judge's limits, and where generation runs. :func:`trl_config` turns them into the keyword
arguments of TRL's ``GRPOConfig``; nothing else builds that config.

The ci and full values live in the ``rl`` section of :mod:`course_lib.profiles` (:func:`rl_settings`
reads them); the dataclass defaults are the ci values.

Introduced in lesson 10.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace
from typing import TYPE_CHECKING, Any

from course_lib.evaluation.rewards import REWARD_DOC, REWARDS  # the one reward module (lesson 06)

if TYPE_CHECKING:
    from course_lib.profiles import ProfileLike

PROFILE_ONLY_KEYS = ("in_drill",)   # keys of the profile's rl section that are not RLSettings fields


@dataclass(frozen=True)
class RLSettings:
    """One RL run (the drill's ``--rl-*`` options and the profile's ``rl`` values).

    Batch shape: every optimisation step trains on ``prompts_per_step`` groups of ``group_size``
    rollouts (TRL's ``per_device_train_batch_size`` = their product, ``num_generations`` = K). One
    generation round samples ``steps_per_generation`` steps' worth of groups at once; the steps after
    the first in a round train on rollouts of a policy one update older, which is what the clipped
    ratio (``epsilon`` below 1, ``epsilon_high`` above) is for — with one step per round the ratio is
    exactly 1 and nothing is ever clipped.
    """

    steps: int = 25                       # optimisation steps (--rl-steps)
    group_size: int = 8                   # K rollouts per prompt (--rl-group-size; the KAT notes' K = 8)
    reward: str = "pass"                  # one of REWARDS (--rl-reward)
    prompts_per_step: int = 8             # groups per optimisation step
    steps_per_generation: int = 1         # optimisation steps per generation round
    num_iterations: int = 1               # passes over each round's rollouts (PPO epochs, mu)
    learning_rate: float = 1e-4
    lr_scheduler_type: str = "constant"
    warmup_steps: int = 0
    max_grad_norm: float = 1.0
    beta: float = 0.0                     # KL weight against the starting model; 0 = no KL term (kl logged as null)
    epsilon: float = 0.2                  # lower clip side: ratio >= 1 - epsilon
    epsilon_high: float = 0.28            # upper clip side: ratio <= 1 + epsilon_high (DAPO's clip-higher)
    loss_type: str = "dapo"               # token-level aggregation over the batch (TRL's default)
    scale_rewards: str = "group"          # advantage = (r - group mean) / group std
    temperature: float = 1.0
    max_completion_length: int = 72       # tokens after the def line (the ci bodies need <= 60)
    mask_truncated_completions: bool = False
    seed: int = 0
    threads: int = 2                      # torch threads of the trainer's process
    # OpenMP threads that sleep while they wait: on cores shared with other jobs, spinning threads burned
    # 6x the CPU time for the same generation (64 rollouts: 9.5 CPU s spinning vs 1.6 passive, 2 threads)
    omp_wait_policy: str = "PASSIVE"
    bf16: bool = False                    # fp32 in ci: the budget holds on a CPU without bf16 instructions
    use_cpu: bool = True
    # generation: transformers inside the trainer (ci), or vLLM colocated on a GPU (full) with TRL's
    # train/inference importance-sampling correction, here token-level masking outside [min, max] (IcePop-style)
    use_vllm: bool = False
    vllm_mode: str = "colocate"
    vllm_gpu_memory_utilization: float = 0.3
    vllm_importance_sampling_correction: bool = True
    vllm_importance_sampling_mode: str = "token_mask"
    vllm_importance_sampling_clip_min: float | None = 0.5
    vllm_importance_sampling_clip_max: float | None = 2.0
    # the judge: the course sandbox in the course's process
    judge_workers: int = 4                # sandbox runs at once: start-up bound, the trainer waits meanwhile
                                          # (64 programs under load: 2 workers 24/s, 4 workers 40/s, 8 49/s)
    judge_timeout_s: float = 2.0          # per program; the tasks run in milliseconds, a loop costs this much
    judge_memory_mb: int = 128
    # where the judge runs, by the sandbox's one rule (course_lib.evaluation.sandbox.policy): a backend named
    # for the run (the drill's --sandbox-backend), used as named; else $SANDBOX_BACKEND; else sandbox_configured
    # (the profile's sandbox.backend, filled by rl_settings) when it works; else bwrap, else docker
    sandbox_backend: str | None = None
    sandbox_configured: str | None = None
    worker_timeout_s: float = 900.0       # the whole training process (start-up included)
    # evaluation hooks (lesson 10, benchmarks): K samples per eval prompt for pass@k
    passk_samples: int = 8
    passk_temperature: float = 1.0
    passk_batch_size: int = 16            # prompts per generate() call

    def __post_init__(self) -> None:
        if self.reward not in REWARDS:
            raise ValueError(f"unknown RL reward {self.reward!r}; use one of {REWARDS} ({REWARD_DOC})")
        for name in ("steps", "group_size", "prompts_per_step", "steps_per_generation", "num_iterations",
                     "max_completion_length", "threads", "judge_workers"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"RL setting {name} must be >= 1, got {getattr(self, name)!r}")
        if self.group_size < 2:
            raise ValueError("a group needs at least 2 rollouts (group_size >= 2): its advantage is the reward "
                             "minus the group's mean")
        if not (0 <= self.epsilon < 1 and self.epsilon_high >= 0):
            raise ValueError(f"clip sides must be 0 <= epsilon < 1 and epsilon_high >= 0, got "
                             f"{self.epsilon}, {self.epsilon_high}")

    @property
    def rollouts_per_step(self) -> int:
        return self.prompts_per_step * self.group_size

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def rl_settings(profile: ProfileLike = None, **overrides: Any) -> RLSettings:
    """:class:`RLSettings` from the profile's ``rl`` section (``profile``: a :class:`~course_lib.profiles.Profile`,
    ``ci``, ``full`` or None for the default) with ``overrides`` applied (None values are ignored, so CLI
    options that were not given keep the profile's value). Introduced in lesson 10."""
    from course_lib.profiles import resolve_profile

    P = resolve_profile(profile)
    known = {f.name for f in fields(RLSettings)}
    unknown = sorted(set(overrides) - known)
    if unknown:
        raise ValueError(f"unknown RL settings {unknown}; known: {sorted(known)}")
    section = {k: v for k, v in dict(P.rl).items() if k not in PROFILE_ONLY_KEYS}
    bad = sorted(set(section) - known)
    if bad:
        raise ValueError(f"profile {P.name!r}: the rl section has keys that are no RL setting: {bad}")
    vals = {**section, "sandbox_configured": P.sandbox.backend,
            **{k: v for k, v in overrides.items() if v is not None}}
    return replace(RLSettings(), **vals)


def trl_config(settings: RLSettings, output_dir: str) -> dict[str, Any]:
    """The keyword arguments of TRL's ``GRPOConfig`` for ``settings`` (TRL 1.16's names).

    Fixed here: one log record per optimisation step, no checkpoints, no hub, no reporting service,
    no gradient checkpointing (a tiny model on a CPU: it only re-runs the forward pass), dropout off
    (the rollouts' log-probs must be those the loss recomputes). Introduced in lesson 10.
    """
    s = settings
    cfg: dict[str, Any] = {
        "output_dir": output_dir, "max_steps": s.steps, "per_device_train_batch_size": s.rollouts_per_step,
        "gradient_accumulation_steps": 1, "num_generations": s.group_size,
        "steps_per_generation": s.steps_per_generation, "num_iterations": s.num_iterations,
        "learning_rate": s.learning_rate, "lr_scheduler_type": s.lr_scheduler_type, "warmup_steps": s.warmup_steps,
        "max_grad_norm": s.max_grad_norm, "beta": s.beta, "epsilon": s.epsilon, "epsilon_high": s.epsilon_high,
        "loss_type": s.loss_type, "scale_rewards": s.scale_rewards, "temperature": s.temperature,
        "max_completion_length": s.max_completion_length, "mask_truncated_completions": s.mask_truncated_completions,
        "seed": s.seed, "data_seed": s.seed, "bf16": s.bf16, "fp16": False, "use_cpu": s.use_cpu,
        "logging_steps": 1, "save_strategy": "no", "report_to": "none", "push_to_hub": False,
        "disable_tqdm": True, "gradient_checkpointing": False, "disable_dropout": True,
        "dataloader_num_workers": 0, "shuffle_dataset": True, "remove_unused_columns": False,
    }
    if s.use_vllm:
        cfg.update(use_vllm=True, vllm_mode=s.vllm_mode, vllm_gpu_memory_utilization=s.vllm_gpu_memory_utilization,
                   vllm_importance_sampling_correction=s.vllm_importance_sampling_correction,
                   vllm_importance_sampling_mode=s.vllm_importance_sampling_mode,
                   vllm_importance_sampling_clip_min=s.vllm_importance_sampling_clip_min,
                   vllm_importance_sampling_clip_max=s.vllm_importance_sampling_clip_max)
    return cfg
