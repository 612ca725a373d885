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
    assert rec["tree_ppo_counterexample_grads"] == pytest.approx([0.75, 0.0], abs=1e-5)
    assert rec["tree_ppo_per_traj_grad_diff"] < 1e-5 and rec["tree_ppo_shortcut_loss_diff"] > 1e-3
    pack = rec["pack_budget_tokens"]
    assert pack["sorted + DP"] <= pack["first fit, arrival order"] <= pack["no packing"]
    assert rec["tst_segments"] == [[0, 1, 2], [3, 4]] and rec["tst_flat_wrong_context_outputs"] == [3, 4]
    q = rec["trajectory_quality"]
    assert all(v["tests_pass"] for v in q.values()) and q["gold"]["flags"] == []
    assert q["test tampering"]["flags"] and q["hard-coding"]["flags"]
    assert rec["hint_recovery_rejected"] == 2
    assert sum(rec["harness_protocol_counts"].values()) == 200 and min(rec["harness_protocol_counts"].values()) > 40
    losses = rec["emsft_losses"]
    assert losses["EM-SFT"] != losses["failed call deleted"]


def test_lesson_09_records():
    rec = records_of("09")
    assert rec["grpo_all_fail_group_abs_sum"] == 0.0 and rec["grpo_hard_over_easy_weight"] > 1
    assert rec["turn_episode_turns"] >= 50 and 1.0 < rec["turn_trajectory_ratio"] < 1.2
    assert rec["turn_clipped_turns"] == [30]
    assert rec["icepop_dropped_planted"] is True
    assert 0 < rec["dynamic_sampling_kept"] < 64 and rec["rft_kept"] == [0]
    noise = rec["mcla_noise"]
    assert noise["8"] < noise["1"] / 2
    std = rec["critic_adv_std"]
    assert all(h < s for h, s in zip(std["hindsight"], std["history"]))
    assert rec["critic_edit_blame_wrong_file"]["history"] < -0.05
    assert abs(rec["critic_edit_blame_wrong_file"]["hindsight"]) < 0.01
    for regime, adv in rec["ppo_adv_std"].items():
        assert adv["hindsight"] < adv["history"], regime
    clipped = rec["ppo_clipped_first5"]
    assert clipped["lr 0.3 (step-limited)"] < 0.01 < clipped["lr 10 (the clip binds)"]
    assert all(v == "history learns faster" for k, v in rec["ppo_verdicts"].items() if k.endswith("outcome"))
    r = rec["rule_rewards"]
    assert r["success"] == r["success, verified"] > r["success, loopy"] > r["half the F2P"]
    assert r["half the F2P"] > r["right file, no pass"] > r["wrong file"]
    assert rec["mopd_routes"] == ["expert_0", "expert_1", "expert_2"]
    assert max(rec["fusion_kl"]["fused"]) < min(rec["fusion_kl"]["averaged"])
    assert rec["mopd_kl_online"][1] < rec["mopd_kl_online"][0]
    ablation = rec["mopd_gate_ablation"]
    assert len(ablation["teacher reliable"]["gate"]) == len(ablation["teacher unreliable late"]["no gate"]) >= 2
    joint = rec["joint_rl_opd"]
    assert joint["RL + OPD"][0] > joint["OPD only"][0] and joint["RL + OPD"][1] < joint["RL only"][1]
    assert min(rec["stratified_long_per_batch"]) == 2
    assert rec["turn_token_clipped_turns"] > 3 and rec["routing_flipped"] > 0
    assert rec["ref_rft"]["plain sampling"]["novel_successes"] > 0
