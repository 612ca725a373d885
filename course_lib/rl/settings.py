"""The settings of the RL step: one frozen dataclass, its values from the profile.

:class:`RLSettings` holds everything :func:`course_lib.rl.trainer.train_grpo` needs: the group-relative
algorithm's knobs in TRL's own vocabulary (``num_generations`` is the KAT notes' K, ``epsilon`` /
``epsilon_high`` the two clip sides, ``beta`` the KL weight, ``loss_type`` the aggregation), the reward,
the judge's limits, and where generation runs. :func:`trl_config` turns them into the keyword
arguments of TRL's ``GRPOConfig``; nothing else builds that config.

Every value a teacher may change lives in the ``rl`` section of :mod:`course_lib.profiles` (ci and full,
the same keys), with the profile's ``seed`` and ``sandbox.backend``; :func:`rl_settings` builds the
settings from them, and those fields have no default here. The fields with a default are implementation
details, each a named constant below with its reason, and the run's own sandbox choice.

Introduced in lesson 10.
"""
from __future__ import annotations

from dataclasses import MISSING, asdict, dataclass, fields
from typing import TYPE_CHECKING, Any

from course_lib.evaluation.rewards import REWARD_DOC, REWARDS  # the one reward module (lesson 06)

if TYPE_CHECKING:
    from course_lib.profiles import ProfileLike

PROFILE_ONLY_KEYS = ("in_drill",)   # keys of the profile's rl section that are not RLSettings fields

OMP_WAIT_POLICY = "PASSIVE"
"""OpenMP threads that sleep while they wait: on cores shared with other jobs, spinning threads burned 6x the
CPU time for the same generation (64 rollouts: 9.5 CPU s spinning vs 1.6 passive, 2 threads)."""

VLLM_MODE = "colocate"
"""TRL's vLLM mode when ``use_vllm``: generation on the trainer's own GPU (the full profile has one GPU; TRL's
``server`` mode needs another for the vLLM server)."""


@dataclass(frozen=True)
class RLSettings:
    """One RL run (the profile's ``rl`` values and the drill's ``--rl-*`` options over them; what each
    value means: the profile's comments and docs/rl.md, "Settings").

    Batch shape: every optimisation step trains on ``prompts_per_step`` groups of ``group_size``
    rollouts (TRL's ``per_device_train_batch_size`` = their product, ``num_generations`` = K). One
    generation round samples ``steps_per_generation`` steps' worth of groups at once; the steps after
    the first in a round train on rollouts of a policy one update older, which is what the clipped
    ratio (``epsilon`` below 1, ``epsilon_high`` above) is for — with one step per round the ratio is
    exactly 1 and nothing is ever clipped.
    """

    # from the profile's rl section
    steps: int                            # optimisation steps (--rl-steps)
    group_size: int                       # K rollouts per prompt (--rl-group-size)
    reward: str                           # one of REWARDS (--rl-reward)
    prompts_per_step: int                 # groups per optimisation step
    steps_per_generation: int             # optimisation steps per generation round
    num_iterations: int                   # passes over each round's rollouts (PPO epochs, mu)
    learning_rate: float
    lr_scheduler_type: str
    warmup_steps: int
    max_grad_norm: float
    beta: float                           # KL weight against the starting model; 0 = no KL term
    epsilon: float                        # lower clip side: ratio >= 1 - epsilon
    epsilon_high: float                   # upper clip side: ratio <= 1 + epsilon_high
    loss_type: str                        # token-level aggregation over the batch
    scale_rewards: str                    # advantage = (r - group mean) / group std
    temperature: float
    max_completion_length: int            # tokens after the def line
    mask_truncated_completions: bool
    threads: int                          # torch threads of the trainer's process
    bf16: bool
    use_cpu: bool
    use_vllm: bool                        # generation: transformers in the trainer, or vLLM colocated on a GPU
    vllm_gpu_memory_utilization: float
    vllm_importance_sampling_correction: bool
    vllm_importance_sampling_mode: str
    vllm_importance_sampling_clip_min: float | None
    vllm_importance_sampling_clip_max: float | None
    judge_workers: int                    # sandbox runs at once
    judge_timeout_s: float                # per program
    judge_memory_mb: int
    worker_timeout_s: float               # the whole training process (start-up included)
    passk_samples: int                    # lesson 10's pass@k: K samples per eval prompt
    passk_temperature: float
    passk_batch_size: int                 # prompts per generate() call
    top_entropy_quantile: float           # TRL: the policy loss keeps the top-q tokens by entropy (1.0: every token)
    prefilter_samples: int                # the KAT notes' filter: K samples per prompt before RL, all-pass and
                                          # all-fail prompts dropped (course_lib.rl.prefilter); 0: off
    # the profile's seed
    seed: int
    # named constants (implementation details, each with its reason above)
    omp_wait_policy: str = OMP_WAIT_POLICY
    vllm_mode: str = VLLM_MODE
    # where the judge runs, by the sandbox's one rule (course_lib.evaluation.sandbox.policy): a backend named
    # for the run (the drill's --sandbox-backend), used as named; else $SANDBOX_BACKEND; else sandbox_configured
    # (the profile's sandbox.backend, filled by rl_settings) when it works; else bwrap, else docker
    sandbox_backend: str | None = None
    sandbox_configured: str | None = None

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
        if not 0.0 <= float(self.top_entropy_quantile) <= 1.0:
            raise ValueError(f"top_entropy_quantile must lie in [0, 1] (1.0: every token), got {self.top_entropy_quantile!r}")
        if int(self.prefilter_samples) == 1 or int(self.prefilter_samples) < 0:
            raise ValueError(f"prefilter_samples must be 0 (off) or >= 2 (one sample cannot be mixed), got "
                             f"{self.prefilter_samples!r}")
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
    vals = {**section, "seed": P.seed, "sandbox_configured": P.sandbox.backend,
            **{k: v for k, v in overrides.items() if v is not None}}
    missing = sorted(f.name for f in fields(RLSettings) if f.default is MISSING and f.name not in vals)
    if missing:
        raise ValueError(f"profile {P.name!r}: the rl section lacks the RL settings {missing}")
    return RLSettings(**vals)


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
        "top_entropy_quantile": s.top_entropy_quantile,
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
