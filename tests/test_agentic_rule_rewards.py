"""The three-layer rule reward: success dominates, penalties bite, progress only for failures."""
from __future__ import annotations

import pytest

from course_lib.agentic.rule_rewards import (
    RewardConfig,
    Rollout,
    ToolCall,
    Trajectory,
    f_beta,
    malformed_calls,
    repeated_calls,
    repeated_text_ratio,
    rft_select,
    rule_reward,
)

F2P, P2P, GOLD = ["t_new_1", "t_new_2"], ["t_old_1", "t_old_2"], ["src/calc.py"]
SCHEMAS = {"read_file": ["path"], "edit_file": ["path", "patch"]}


def _traj(results, files=("src/calc.py",), calls=(), text="I fixed the rounding bug in calc."):
    return Trajectory(text=text, calls=list(calls), edited_files=list(files), test_results=results)


ALL_PASS = {"t_new_1": True, "t_new_2": True, "t_old_1": True, "t_old_2": True}


def test_f2_weights_recall_over_precision():
    assert f_beta(["a"], ["a"]) == 1.0
    assert f_beta([], ["a"]) == 0.0
    more = f_beta(["a", "b", "c"], ["a"])          # precision 1/3, recall 1
    fewer = f_beta(["a"], ["a", "b", "c"])         # precision 1, recall 1/3
    assert more == pytest.approx(5 * (1 / 3) / (4 * (1 / 3) + 1))
    assert more > fewer                            # F1 would call these equal
    assert f_beta(["a", "b", "c"], ["a"], beta=1) == pytest.approx(f_beta(["a"], ["a", "b", "c"], beta=1))


def test_success_needs_every_f2p_and_every_p2p():
    clean = rule_reward(_traj(ALL_PASS), F2P, P2P, GOLD, SCHEMAS)
    assert clean["success"] == 1.0
    assert clean["progress"] == 0.0 and clean["reward"] == 1.0    # progress is for failed trajectories only
    broke_old = dict(ALL_PASS, t_old_2=False)
    r = rule_reward(_traj(broke_old), F2P, P2P, GOLD, SCHEMAS)
    assert r["success"] == 0.0 and r["p2p_ok"] == 0.0
    missing = {k: v for k, v in ALL_PASS.items() if k != "t_new_2"}   # a test that did not run = failed
    assert rule_reward(_traj(missing), F2P, P2P, GOLD, SCHEMAS)["success"] == 0.0


def _worst_success_and_best_failure(cfg):
    """The worst success (every penalty at once) and the best failure (right file, every F2P test but
    one of ten passing, no penalty) this config can produce."""
    f2p = [f"t_new_{i}" for i in range(10)]
    ok = {t: True for t in f2p + P2P}
    junk = [ToolCall("read_file", "{bad json", turn=0)] * 8 + [ToolCall("read_file", '{"path": "a"}', turn=0)] * 8
    worst = rule_reward(_traj(ok, calls=junk, text="retry the edit now " * 30), f2p, P2P, GOLD, SCHEMAS, cfg)
    best = rule_reward(_traj(dict(ok, t_new_9=False)), f2p, P2P, GOLD, SCHEMAS, cfg)
    return worst, best


def test_no_failure_outscores_a_success():
    cfg = RewardConfig()
    worst, best = _worst_success_and_best_failure(cfg)
    assert worst["success"] == 1.0 and worst["penalty"] == cfg.max_penalty     # every penalty, capped
    assert best["success"] == 0.0 and best["penalty"] == 0.0
    assert best["reward"] < worst["reward"]
    assert best["reward"] <= cfg.progress_cap < cfg.success - cfg.max_penalty


def test_a_config_where_a_failure_can_win_is_refused():
    """max_penalty 0.65: the worst success scores 0.35, the best failure above (0.38 here, up to the
    0.4 cap), so rule_reward refuses the config rather than rank a failure first."""
    with pytest.raises(ValueError, match="failure outscore a success"):
        _worst_success_and_best_failure(RewardConfig(max_penalty=0.65))
    loose = RewardConfig(max_penalty=0.65, progress_cap=0.3)      # repaired by a lower progress cap
    worst, best = _worst_success_and_best_failure(loose)
    assert best["reward"] < worst["reward"]


def test_progress_for_failures_rewards_localisation_and_partial_tests():
    fail = dict(ALL_PASS, t_new_1=False, t_new_2=False)
    wrong_file = rule_reward(_traj(fail, files=["src/other.py"]), F2P, P2P, GOLD, SCHEMAS)
    right_file = rule_reward(_traj(fail), F2P, P2P, GOLD, SCHEMAS)
    half = rule_reward(_traj(dict(fail, t_new_1=True)), F2P, P2P, GOLD, SCHEMAS)
    assert wrong_file["reward"] == 0.0 < right_file["reward"] < half["reward"]
    # partial credit does not count when a Pass-to-Pass test broke
    broke = rule_reward(_traj(dict(fail, t_new_1=True, t_old_1=False)), F2P, P2P, GOLD, SCHEMAS)
    assert broke["reward"] == right_file["reward"]


def test_behaviour_penalties():
    calls = [ToolCall("read_file", '{"path": "a.py"}'), ToolCall("read_file", '{"path":  "a.py"}'),
             ToolCall("edit_file", '{"path": "a.py"}'), ToolCall("run", '{"cmd": "ls"}'),
             ToolCall("read_file", "not json")]
    assert repeated_calls(calls) == 1            # same call with different whitespace
    assert malformed_calls(calls, SCHEMAS) == 3  # missing key, unknown tool, bad JSON
    assert repeated_text_ratio("a b c d e f g h i j") == 0.0
    assert repeated_text_ratio("retry the edit now " * 20) > 0.7
    clean = rule_reward(_traj(ALL_PASS), F2P, P2P, GOLD, SCHEMAS)
    loopy = rule_reward(_traj(ALL_PASS, calls=calls, text="retry the edit now " * 20), F2P, P2P, GOLD, SCHEMAS)
    assert loopy["penalty"] > 0 and loopy["reward"] < clean["reward"]


def test_empty_fail_to_pass_is_refused():
    with pytest.raises(ValueError, match="Fail-to-Pass"):
        rule_reward(_traj(ALL_PASS), [], P2P, GOLD, SCHEMAS)


def test_repeated_calls_count_only_within_one_turn():
    run = '{"cmd": "pytest tests/test_calc.py"}'
    across = [ToolCall("run", run, turn=0), ToolCall("edit_file", '{"path": "a.py"}', turn=1),
              ToolCall("run", run, turn=2)]
    assert repeated_calls(across) == 0                        # verifying the fix after an edit is free
    within = [ToolCall("run", run, turn=3), ToolCall("run", run, turn=3), ToolCall("run", run, turn=3)]
    assert repeated_calls(within) == 2
    assert ToolCall("run", run).turn == 0


def test_rft_keeps_correct_clean_non_repeating_rollouts():
    q = lambda s, turn=0: ToolCall("search", '{"q": "%s"}' % s, turn=turn)
    rollouts = [Rollout(True, [q("a"), q("b", 1)], [False, False]),          # kept
                Rollout(False, [q("a")], [False]),                            # wrong answer
                Rollout(True, [q("a"), q("b")], [True, False]),              # a failed call
                Rollout(True, [q("a"), q("a", 2)], [False, False])]          # the same query twice
    assert rft_select(rollouts) == [0]
    with pytest.raises(ValueError, match="rollout 0"):
        rft_select([Rollout(True, [q("a")], [])])
