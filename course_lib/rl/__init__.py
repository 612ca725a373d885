"""Execution feedback as a training signal: group-relative RL on the drill's model (lesson 10).

The drill's pipeline-SFT model writes answers to the training rows' prompts; the course sandbox runs
each answer against the row's hidden tests; TRL's ``GRPOTrainer`` raises the probability of the answers
that scored above their group's mean. Public API:

* :func:`train_grpo` — the RL step (one entry point for the drill, lesson 10 and the benchmark);
* :class:`RLSettings`, :func:`rl_settings` — its settings, ci and full;
* :func:`sample_pass_at_k`, :func:`greedy_test_pass1` — the evaluation hooks;
* :func:`ensure_trl_venv`, :func:`trl_python`, :func:`trl_status` — the TRL side environment;
* :func:`reward_of`, :func:`group_stats`, :func:`build_rl_prompts` — the pieces, for the lesson.

Introduced in lesson 10.
"""
from course_lib.rl.passk import greedy_test_pass1, sample_pass_at_k
from course_lib.rl.rollouts import LOG_KEYS, RLPrompt, RolloutJudge, build_rl_prompts, group_stats, reward_of, step_record
from course_lib.rl.settings import REWARDS, RLSettings, rl_settings, trl_config
from course_lib.rl.trainer import RLUnavailable, train_grpo
from course_lib.rl.trl_env import ensure_trl_venv, trl_python, trl_status, trl_venv_path

__all__ = ["LOG_KEYS", "REWARDS", "RLPrompt", "RLSettings", "RLUnavailable", "RolloutJudge", "build_rl_prompts",
           "ensure_trl_venv", "greedy_test_pass1", "group_stats", "reward_of", "rl_settings", "sample_pass_at_k",
           "step_record", "train_grpo", "trl_config", "trl_python", "trl_status", "trl_venv_path"]
