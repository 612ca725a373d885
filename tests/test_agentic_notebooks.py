"""Lessons 08–09: the numbers the executed solution notebooks recorded."""
from __future__ import annotations

import pytest

from tests.notebook_helpers import records_of

pytestmark = pytest.mark.notebooks


def test_lesson_08_records():
    rec = records_of("08")
    assert rec["tree_max_grad_diff"] < 1e-5 and rec["tree_loss_diff"] < 1e-5
    assert rec["tree_wrong_pos_grad_diff"] > 1e-4          # the negative controls really differ
    assert rec["tree_wrong_weight_loss_diff"] > 1e-3
    assert rec["tree_token_speedup_16x90"] > 6.0
    assert rec["emsft_trained_tokens"] > 0 and rec["emsft_failed_tokens_in_context"] > 0
    assert rec["envs_ok"] == {"blog_slugify": True, "money_rounding": True, "store_inventory": True,
                              "units_broken_env": False}
    assert rec["env_checked_wrong_rewards"] == 0 and rec["env_naive_wrong_rewards"] >= 1
    assert set(rec["env_broken_gold_outcomes"].values()) == {"excluded"}
    assert rec["emsft_pytest_call_trained"] is True
    assert rec["tree_float_weights_grad_diff"] < 1e-5


def test_lesson_09_records():
    rec = records_of("09")
    assert rec["grpo_all_fail_group_abs_sum"] == 0.0 and rec["grpo_hard_over_easy_weight"] > 1
    assert rec["turn_episode_turns"] >= 50 and 0.8 < rec["turn_trajectory_ratio"] < 1.2
    assert rec["turn_clipped_turns"] == [30]
    assert rec["icepop_dropped_planted"] is True
    assert 0 < rec["dynamic_sampling_kept"] < 64 and rec["rft_kept"] == [0]
    noise = rec["mcla_noise"]
    assert noise["8"] < noise["1"] / 2
    std = rec["critic_adv_std"]
    assert all(h < s for h, s in zip(std["hindsight"], std["history"]))
    assert rec["critic_edit_blame_wrong_file"]["history"] < -0.05
    assert abs(rec["critic_edit_blame_wrong_file"]["hindsight"]) < 0.01
    assert rec["ppo_adv_std"]["hindsight"][0] < rec["ppo_adv_std"]["history"][0]
    assert rec["ppo_final"]["outcome"][0] < rec["ppo_final"]["hindsight"][0]
    r = rec["rule_rewards"]
    assert r["success"] == r["success, verified"] > r["success, loopy"] > r["half the F2P"]
    assert r["half the F2P"] > r["right file, no pass"] > r["wrong file"]
    assert rec["mopd_kl_online"][1] < rec["mopd_kl_online"][0]
    assert len(rec["mopd_cold_start_kl"]) == 2
    assert len(rec["mopd_gate_ablation"]["gate"]) == len(rec["mopd_gate_ablation"]["no gate"]) >= 2
    assert min(rec["stratified_long_per_batch"]) == 2
