# %% [markdown] slideshow={"slide_type": "slide"}
# # 第10课 用执行反馈做训练信号：在演练的模型上跑 RL (RL on execution feedback)
#
# 第06课把「代码跑通了多少测试」写成了 reward；第07课训练出了演练的 pipeline SFT 模型；第09课在玩具上看清了 GRPO 的优势和 PPO 的裁剪。
# 这一课把三者接起来：**同一个 sandbox judge 给 reward，TRL 的 `GRPOTrainer` 用它更新演练的模型**，然后用第07课的评测原样比较 SFT 与 RL。
#
# 这是课程的收尾：一个真实的、端到端的 RL 循环——rollout、sandbox 判分、组内优势、裁剪的更新、评测、审计。

# %% [markdown] slideshow={"slide_type": "subslide"}
# **学习目标 (Learning goals)**
#
# 1. **Reward 从 judge 来**：三种 reward（全部通过 0/1、通过比例、讲义的 `calculate_reward`）在同一组 rollout 上的差别。
# 2. **GRPO vs PPO**：组内相对优势代替 critic；裁剪的两侧（`epsilon` / `epsilon_high`）各在什么时候起作用。
# 3. **跑真实的循环**：演练的第 6 步 `rl`——reward 曲线、通过率、没有信号的组、熵。
# 4. **量出来，不是假设**：SFT vs RL 的 test pass@1（新实例 / 留出组合）与 pass@k；基准的结论与本次运行对照。
# 5. **审计**：训练中得到 reward 的通过 rollout 和 RL 模型答对的评测答案，在按题目规格**新抽的输入**上、在**另一个** sandbox 后端上重新判分——能和 judge 意见不一致的审计。

# %% slideshow={"slide_type": "skip"} tags=["parameters"]
PROFILE = "ci"        # "ci": CPU、离线、课程的小模型；"full": GPU、Qwen2.5-0.5B-Instruct、vLLM 生成
SEED = 0
RL_STEPS = None       # None: profile 的步数（ci 25）
RL_GROUP_SIZE = None  # None: K = 8
RL_REWARD = None      # None: profile 的 reward（"pass"）；也可以 "fraction" / "lecture"
PASSK_PROMPTS = 10    # pass@k：每个评测部分取多少道题（每题采样 K 个答案）
FORCE = False         # True: 重新训练 rl
DRILL_SEED = None     # None: SEED（第07课用同一个 SEED 训练的演练）；CI 用 SEED=1、DRILL_SEED=0 在已有的演练上换一个 RL 种子
EVAL_SIZE = None      # None: profile 的评测集（ci 500）；和第07课的 EVAL_SIZE 相同，才读到第07课训练的演练
SFT_STEPS = None      # None: profile 的 SFT 步数（ci 800）；同上，和第07课一致

# %% slideshow={"slide_type": "skip"}
import json
import os
import re
from dataclasses import replace

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from IPython.display import display

from course_lib import drill, exercises, get_profile, record
from course_lib.drill import evaluate, scoreboard
from course_lib.drill.config import VARIANT_LABELS
from course_lib.drill.taskgen import HOLDOUT_HALVES
from course_lib.drill.outputs import read_json_output, setup_logging
from course_lib.rl.drill_step import drill_rl_settings, rl_unavailable
from course_lib.paths import repo_root
from course_lib.rl import RolloutJudge, build_rl_prompts, sample_pass_at_k
from course_lib.rl.mechanics import clipped_token_loss, trl_group_advantages
from course_lib.rl.passk import sample_completions

P = get_profile(PROFILE)
rl_overrides = {k: v for k, v in {"steps": RL_STEPS, "group_size": RL_GROUP_SIZE, "reward": RL_REWARD,
                                  "seed": SEED}.items() if v is not None}
cfg = drill.config_from_profile(P, seed=SEED if DRILL_SEED is None else DRILL_SEED, force=False, use_rl=True,
                                rl_overrides=rl_overrides, eval_size=EVAL_SIZE, sft_steps=SFT_STEPS)
cfg.paths.make()
log_path = setup_logging(cfg.paths.log_dir, quiet=True)
S = drill_rl_settings(cfg)
print(P.description)
print(f"RL: {S.steps} steps x {S.prompts_per_step} prompts x K={S.group_size} rollouts, reward {S.reward!r}, "
      f"lr {S.learning_rate}, clip [1-{S.epsilon}, 1+{S.epsilon_high}], beta (KL) {S.beta}, loss {S.loss_type!r}")
RL_WHY_NOT = rl_unavailable(cfg)
print("TRL environment:", "ready" if RL_WHY_NOT is None else f"MISSING - {RL_WHY_NOT}")

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 1. Reward 从 judge 来
#
# 一条 rollout 就是模型从任务的 `def` 行往下写的函数体（和第07课 test pass@1 同一个协议）。judge 在 sandbox 里运行「`def` 行 + 函数体 + 该训练行的隐藏测试」，reward 只看 judge 的结论——模型只贡献文本。
#
# 三种 reward：
#
# - `pass`：全部测试通过为 1，否则 0；
# - `fraction`：通过的测试比例，出错为 0；
# - `lecture`：讲义的 `calculate_reward`——语法错误 −1，运行时错误 −0.5，否则通过比例。
#
# 下面从 pipeline SFT 模型对几道训练题各采样 K 个答案，找一道结果有对有错的题，把这一组用三种 reward 打分。

# %% slideshow={"slide_type": "subslide"}
rows = read_json_output(cfg.paths.codegen_json, "pipeline")
hidden = {int(r["idx"]): r for r in read_json_output(cfg.paths.train_json, "download") if r.get("tests")}
sft_model = drill.model_path_for(cfg, "pipeline_sft")
from transformers import AutoTokenizer

prompts, dropped = build_rl_prompts(rows, hidden, AutoTokenizer.from_pretrained(sft_model))
print(f"{len(prompts)} RL prompts from {len(rows)} pipeline rows (left out: {dropped})")
demo_prompts = prompts[:8]
demo = sample_completions(sft_model, demo_prompts, n=S.group_size, temperature=S.temperature,
                          max_new_tokens=S.max_completion_length, seed=SEED, batch_size=8, threads=2)
judges = {kind: RolloutJudge(demo_prompts, replace(S, reward=kind)) for kind in ("pass", "fraction", "lecture")}
scores = {kind: [j.score([p.key] * len(c), c) for p, c in zip(demo_prompts, demo)] for kind, j in judges.items()}
mixed = next((i for i, s in enumerate(scores["pass"]) if 0 < sum(s["passed"]) < len(s["passed"])), 0)
print("task:", demo_prompts[mixed].instruction[:160].replace("\n", " "))
print("prefix:", demo_prompts[mixed].prefix.strip())
group = pd.DataFrame({"rollout (whitespace squeezed)": [" ".join(c.split())[:90] or "(empty)" for c in demo[mixed]],
                      **{kind: scores[kind][mixed]["rewards"] for kind in scores}})
display(group)
_ = record("demo_group_rewards", {k: scores[k][mixed]["rewards"] for k in scores})

# %% [markdown] slideshow={"slide_type": "subslide"}
# `pass` 只区分「全对 / 不全对」；`fraction` 给部分正确的答案一部分分；`lecture` 还把「写不出能编译的代码」罚得比「写错」更重。
# 哪一种 reward 让模型学得更好，不是看公式能猜出来的——第 4 节读基准的结果。
#
# ### 练习 1：三种 reward
#
# 写 `my_rl_reward(kind, status, passed, total)`：`status` 是 sandbox 真正返回的结论之一（`"passed"`、`"failed"`、`"syntax_error"`、`"runtime_error"`、`"timeout"`、`"memory_limit"`、`"output_limit"`，以及没有代码时的 `"no_code"`；`"sandbox_error"` 不是样本的错，不打分），程序通过了事先计划的 `total` 个测试中的 `passed` 个（setup 行不算测试，提前结束的运行没回答的测试算失败；加载时就退出的程序记作 `"runtime_error"`）。
# `lecture`：语法错误或没有代码 −1，运行时错误、超时、超内存、超输出 −0.5，否则 `passed / total`；`fraction`：同样的比例，但出错时为 0；`pass`：只有 `status == "passed"` 且全部通过才是 1。一道没有测试的题（`total == 0`）只看 status：`"passed"` 得 1。
# 这就是课程唯一的 reward 模块 `course_lib.evaluation.rewards.shaped_reward`（第06课、演练和 RL 都用它）。

# %% slideshow={"slide_type": "-"}
def my_rl_reward(kind, status, passed, total):
    ### BEGIN SOLUTION
    if kind == "pass":
        return 1.0 if status == "passed" and passed == total else 0.0
    if status in ("syntax_error", "no_code"):
        return -1.0 if kind == "lecture" else 0.0
    if status in ("runtime_error", "timeout", "memory_limit", "output_limit"):
        return -0.5 if kind == "lecture" else 0.0
    if total == 0:
        return 1.0 if status == "passed" else 0.0
    return passed / total
    ### END SOLUTION


my_rl_reward = exercises.check("10-1", my_rl_reward)

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 2. 组内优势 (GRPO) 与裁剪的两侧
#
# PPO 需要一个 critic 估计 $V(s)$，优势 $A = R - V$。GRPO 不要 critic：同一道题采样 K 个答案，用**这一组**的均值做 baseline：
# $$A_i = \frac{r_i - \operatorname{mean}(r_{1..K})}{\operatorname{std}(r_{1..K}) + 10^{-4}}$$
# TRL 的 `GRPOTrainer`（`scale_rewards="group"`）用样本标准差（Bessel 校正），批里**连续** K 条属于同一道题。一组全对或全错时，所有 $A_i = 0$：这一组**没有信号**。
#
# 讲义 用 PPO（带 critic）最大化 pass_rate；本课 用 GRPO（TRL 的 `GRPOTrainer`，组内相对优势、两侧裁剪），因为同一道题能便宜地采 K 个答案、judge 给的 reward 可验证，组均值就是 baseline，省掉一个和策略一样大的 critic（docs/rl.md 写了选择与测量）。
#
# KAT 笔记 用难度 $D_i = 1-\bar r_i$ 和组内熵给优势加权（第09课）；本课 用不加权的组内优势，因为 TRL 的 `GRPOTrainer` 不带这两种权重，先量清楚不加权的基线。

# %% [markdown] slideshow={"slide_type": "subslide"}
# ### 练习 2：TRL 的组内优势
#
# `my_trl_advantages(rewards, group_size)`：`rewards` 是一个扁平的列表，每连续 `group_size` 条是一组；返回每条的 $(r - \text{组均值}) / (\text{组的样本标准差} + 10^{-4})$（`ddof=1`）。

# %% slideshow={"slide_type": "-"}
def my_trl_advantages(rewards, group_size):
    ### BEGIN SOLUTION
    g = np.asarray(rewards, dtype=np.float64).reshape(-1, group_size)
    return ((g - g.mean(axis=1, keepdims=True)) / (g.std(axis=1, ddof=1, keepdims=True) + 1e-4)).reshape(-1).tolist()
    ### END SOLUTION


my_trl_advantages = exercises.check("10-2", my_trl_advantages)

# %% slideshow={"slide_type": "subslide"}
adv = {kind: trl_group_advantages(scores[kind][mixed]["rewards"], S.group_size) for kind in scores}
display(pd.DataFrame({"pass": group["pass"], **{f"A ({k})": np.round(a, 2) for k, a in adv.items()}}))
flat = [i for i, s in enumerate(scores["pass"]) if len(set(s["rewards"])) == 1]
print(f"of these {len(demo_prompts)} groups, {len(flat)} have no signal under the pass reward (every rollout the same)")
_ = record("demo_groups_without_signal", len(flat))
### BEGIN HIDDEN TESTS
assert abs(float(np.sum(adv["pass"]))) < 1e-6            # advantages of a group sum to 0
### END HIDDEN TESTS

# %% [markdown] slideshow={"slide_type": "subslide"}
# ### 裁剪的两侧
#
# 同一批 rollout 被训练不止一次时（`steps_per_generation > 1` 或 `num_iterations > 1`），新策略 $\pi_\theta$ 和采样时的 $\pi_{\text{old}}$ 不同，比率 $\rho = \pi_\theta / \pi_{\text{old}}$ 偏离 1。损失（取负的 PPO 目标）：
# $$\ell = -\min\big(\rho A,\ \operatorname{clip}(\rho, 1-\epsilon_{\text{low}}, 1+\epsilon_{\text{high}})\,A\big)$$
# 上侧只在 $A>0$ 时起作用，下侧只在 $A<0$ 时起作用；DAPO 的 clip-higher 让 $\epsilon_{\text{high}} > \epsilon_{\text{low}}$，给低概率的好 token 更多上升空间。`train_log.json` 的 `clip_low_fraction` / `clip_high_fraction` 就是两侧起作用的 token 比例。
#
# ### 练习 3：两侧裁剪的逐 token 损失
#
# `my_clipped_loss(ratios, advantages, eps_low=0.2, eps_high=0.28)`：返回每个 token 的 $\ell$（列表）。

# %% slideshow={"slide_type": "-"}
def my_clipped_loss(ratios, advantages, eps_low=0.2, eps_high=0.28):
    ### BEGIN SOLUTION
    return [-min(r * a, min(max(r, 1 - eps_low), 1 + eps_high) * a) for r, a in zip(ratios, advantages)]
    ### END SOLUTION


my_clipped_loss = exercises.check("10-3", my_clipped_loss)

# %% slideshow={"slide_type": "subslide"}
quadrants = pd.DataFrame({"ratio": [1.5, 0.5, 1.5, 0.5, 1.1], "A": [1.0, -1.0, -1.0, 1.0, 1.0]})
loss, low, high = clipped_token_loss(quadrants["ratio"], quadrants["A"], S.epsilon, S.epsilon_high)
quadrants["loss"], quadrants["low side binds"], quadrants["high side binds"] = np.round(loss, 3), low, high
display(quadrants)
print(f"clip sides of this run: ratio below {1 - S.epsilon:.2f} (A < 0) or above {1 + S.epsilon_high:.2f} (A > 0)")
### BEGIN HIDDEN TESTS
assert low.tolist() == [False, True, False, False, False] and high.tolist() == [True, False, False, False, False]
### END HIDDEN TESTS

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 3. 真实的循环：演练的第 6 步 `rl`
#
# `python -m course_lib.drill --only-step rl` 做的事，这里在 notebook 里调用同一个函数：
#
# 1. 从 `pipeline_sft` 出发，每步取若干道训练题、每题 K 条 rollout（TRL 在自己的环境 `.venv-trl` 里生成和更新）；
# 2. 课程进程里的 judge 在 sandbox 里跑每条 rollout 的隐藏测试，把 reward 写回给训练进程——测试和结论从不离开课程进程；
# 3. 训练完，第 4、5 步原样评测 `rl`，`drill_metrics.json` 多出一行 `rl`。
#
# 结果已经在缓存里时直接读取（几秒）；否则训练和评测要几分钟。

# %% slideshow={"slide_type": "subslide"}
run = drill.RunState()                  # what the step records (a skipped step 6 leaves the rl row out)
done = drill.run_drill(replace(cfg, force=FORCE), only_step="rl", state=run)   # FORCE for this step only
RL_READY = "rl" in run.variants(cfg) and (cfg.paths.output_for("rl") / "summary.json").exists()
if RL_READY:
    rec = read_json_output(cfg.paths.model_record("rl"), "rl")
    train_log = json.loads((cfg.paths.output_for("rl") / "train_log.json").read_text())
    r = rec["rl"]
    drawn = r['steps'] * S.prompts_per_step
    print(f"trained {r['steps']} steps x {S.prompts_per_step} prompts = {drawn} prompts drawn from a pool of {r['prompts']} "
          f"training prompts; x K={S.group_size}: {r['rollouts']} rollouts, {r['sandbox_runs']} sandbox runs (distinct programs) "
          f"in {r['seconds']:.0f} s ({r['generate_seconds']:.0f} s generating, {r['judge_seconds']:.0f} s judging)"
          + (" - cached" if done["rl"].get("train") == {"skipped": True} else ""))
    _ = record("rl_steps", r["steps"])
else:
    print(f"step 6 skipped: {done['rl'].get('skipped')}\nthe rest of this lesson needs it; `./course setup` builds the TRL environment")
### BEGIN HIDDEN TESTS
assert RL_READY or not os.environ.get("CI"), "CI must run the RL step (the TRL environment is part of setup)"
if RL_READY:
    assert [x["step"] for x in train_log] == list(range(1, S.steps + 1))
### END HIDDEN TESTS

# %% slideshow={"slide_type": "subslide"}
if RL_READY:
    log_df = pd.DataFrame(train_log).set_index("step")
    fig, axes = plt.subplots(1, 3, figsize=(12, 2.8))
    log_df[["reward_mean", "pass_rate"]].plot(ax=axes[0], title="reward and pass rate of the rollouts")
    (log_df["groups_without_signal"] / log_df["groups"]).plot(ax=axes[1], title="share of groups without signal")
    log_df["entropy"].plot(ax=axes[2], title="entropy (nats / token)")
    for ax in axes:
        ax.set_xlabel("step")
    plt.tight_layout(); plt.show()
    first, last = log_df.iloc[: max(1, len(log_df) // 5)], log_df.iloc[-max(1, len(log_df) // 5):]
    print(f"pass rate of the rollouts: first fifth of the steps {first['pass_rate'].mean():.3f}, last fifth {last['pass_rate'].mean():.3f}")
    print(f"clip fractions: low {log_df['clip_low_fraction'].max():.3f}, high {log_df['clip_high_fraction'].max():.3f} at most; "
          f"KL: {'not computed (beta = 0)' if log_df['kl'].isna().all() else log_df['kl'].iloc[-1]}; "
          f"steps per generation round: {S.steps_per_generation}")

# %% [markdown] slideshow={"slide_type": "subslide"}
# 上面打印的数怎么来的：每步取 `prompts_per_step` 道题（ci：8），25 步共 25 × 8 = 200 道——题是从几百到上千道训练题的**题库**里抽的，没有全部用到；
# 每道题 K = 8 条 rollout，所以 rollouts = 200 × 8 = 1600。sandbox runs 比 rollouts 少：同一轮里完全相同的程序只在 sandbox 里跑一次，
# 结论分给每条相同的 rollout（小模型常常对同一道题写出一模一样的答案）。
#
# 读图时注意两件事：
#
# - rollout 的通过率是**训练题**上、带采样温度的通过率，它的上升不等于评测变好——第 4 节看评测。
# - ci 的设置每个生成轮次只更新一步（`steps_per_generation = 1`），所以 $\rho$ 恒为 1，两侧裁剪从不起作用（上面打印的比例）；裁剪在 full profile（`steps_per_generation = 2`）里才有事做。

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 4. SFT vs RL：同一套评测
#
# 第07课的评测原样跑在 `rl` 上：test pass@1（贪心解码，给定 `def` 行）分「新实例」（训练过的任务族的新题）和「留出组合」（训练里没出现过的主题组合）。

# %% slideshow={"slide_type": "subslide"}
if RL_READY:
    metrics = json.loads((cfg.paths.output_dir / "drill_metrics.json").read_text())
    cols = ["test pass@1", "test pass@1 (new instances)", "test pass@1 (held-out combinations)",
            *(f"test pass@1 (held-out: {h})" for h in HOLDOUT_HALVES), "Pass@1", "SER", "PPL"]
    table = pd.DataFrame({VARIANT_LABELS[v]: {c: metrics[v].get(c) for c in cols} for v in ("pipeline_sft", "rl")}).T
    display(table.style.format("{:.3f}"))
    gain = {part: metrics["rl"][f"test pass@1 ({part})"] - metrics["pipeline_sft"][f"test pass@1 ({part})"]
            for part in ("new instances", "held-out combinations")}
    # each difference with its 95 % paired interval over this run's prompts (bootstrap) and McNemar's p
    if not (cfg.paths.output_for("pipeline_sft") / evaluate.PER_PROMPT_FILE).exists():   # a drill judged before step 5 kept them
        drill.step_evaluation(cfg, ["pipeline_sft"], state=run)
    per_prompt = {v: evaluate.read_per_prompt(cfg.paths.output_for(v) / evaluate.PER_PROMPT_FILE) for v in ("rl", "pipeline_sft")}
    rl_vs_sft = scoreboard.compare_variants(per_prompt, "rl", "pipeline_sft")
    display(scoreboard.comparison_table(rl_vs_sft))
    for key in ("test pass@1 (new instances)", "test pass@1 (held-out combinations)"):
        print(f"{key}: {rl_vs_sft[key]['verdict']}")
    _ = record("rl_gain", gain)
### BEGIN HIDDEN TESTS
if RL_READY:
    assert set(metrics["rl"]) == set(metrics["pipeline_sft"])
### END HIDDEN TESTS

# %% [markdown] slideshow={"slide_type": "fragment"}
# 表的后三列是第07课讲义 §5.1 的指标，算在模型的**自由回答**上（不给 `def` 行，回答在 sandbox 里运行后归入六类结论）：**Pass@1** = Pass / N，
# **SER** = SyntaxError / N；**PPL** 是模型 teacher-forcing 读参考答案（raw 格式）时的困惑度（第07课「PPL」一节）。
# RL 只奖励「给定 `def` 行」时隐藏测试的通过，这三列都不是它优化的目标。Pass@1 小降、SER 小升（如 0.96 → 0.935、0.04 → 0.065）是
# 几道题的差别，一个种子之内分不清效果和噪声；它提醒我们 RL 的收益不会自动迁移到另一种 prompt 格式。PPL 在一千左右，说明 raw 格式的
# 参考答案（说明文字 + 代码块）远离模型学到的写法；RL 不在参考答案上训练，这个数不用来判断 RL 的好坏。

# %% [markdown] slideshow={"slide_type": "subslide"}
# ### pass@k：RL 只是「磨尖」了分布吗？
#
# 贪心的 pass@1 上升有两种可能：模型把已经会的答案概率调高（磨尖，pass@1 升、pass@K 不动），或者学会了原来 K 次也写不出的题（pass@K 也升）。
# 对每个评测部分取 `PASSK_PROMPTS` 道题，每题采样 K 个答案（温度 1），用无偏估计算 pass@k，k = 1…K。

# %% slideshow={"slide_type": "subslide"}
import time

if RL_READY:
    evals = read_json_output(cfg.paths.eval_json, "download")
    passk = {}
    for v in ("pipeline_sft", "rl"):   # ~1-1.5 min per model on 2 cores: say what runs
        t_pk = time.monotonic()
        print(f"sampling K={S.passk_samples} answers x {PASSK_PROMPTS} prompts per part with {VARIANT_LABELS[v]} ...", flush=True)
        passk[v] = sample_pass_at_k(drill.model_path_for(cfg, v), evals, S, limit_per_part=PASSK_PROMPTS)
        print(f"  done in {time.monotonic() - t_pk:.0f} s", flush=True)
    ks = list(range(1, S.passk_samples + 1))
    fig, axes = plt.subplots(1, 2, figsize=(10, 2.8))
    for ax, part in zip(axes, ("new instances", "held-out combinations")):
        for (v, res), style in zip(passk.items(), ({"marker": "o"}, {"marker": "x", "linestyle": "--", "markersize": 9})):
            if part in res["parts"]:   # two styles: identical curves stay visible on top of each other
                ax.plot(ks, [res["parts"][part][f"pass@{k}"] for k in ks], label=VARIANT_LABELS[v], **style)
        ax.set_title(f"pass@k, {part}", fontsize=9); ax.set_xlabel("k"); ax.set_ylim(0, 1.02); ax.legend(fontsize=8)
    plt.tight_layout(); plt.show()
    pk = pd.DataFrame({(VARIANT_LABELS[v], part): {f"pass@{k}": res["parts"][part][f"pass@{k}"] for k in (1, 2, 4, 8) if k <= S.passk_samples}
                       for v, res in passk.items() for part in res["parts"]}).T
    display(pk.style.format("{:.3f}"))
    same_curves = [p for p in passk["rl"]["parts"] if passk["rl"]["parts"][p] == passk["pipeline_sft"]["parts"].get(p)]
    if same_curves:
        print(f"identical curves in {same_curves}: on these prompts RL and SFT sample the same numbers of right answers")
    _ = record("passk", {v: {p: [res["parts"][p][f"pass@{k}"] for k in ks] for p in res["parts"]} for v, res in passk.items()})

# %% [markdown] slideshow={"slide_type": "subslide"}
# ### 基准的结论和本次运行
#
# 一次运行只有一个种子。`benchmarks/bench_rl.py` 对种子 0、1、2 和所选的配置（`--rewards`、`--group-sizes`；记录了哪些配置，下一格的表里每行一个）各跑一次第 6 步，把每次运行在每道评测题上的对错存在
# `benchmarks/results/bench_rl/` 里，对每个配置算 RL − pipeline SFT 的差和它的 95 % 配对置信区间（同时对种子和题目做 bootstrap）。
# **默认配置不在报告它的评测集上选**：基准在一个"选择集"（从训练题里按种子抽的 200 道，带隐藏测试，评测题一道都不在里面）上也测每个模型，
# 选择集上平均最好的配置就是 `chosen`；它在评测集上的结论照实打印。
#
# 结论里的 **target (+0.10)** 是这门课给第 6 步定的目标：三个种子平均，RL 在「留出组合」上的 test pass@1 比 pipeline SFT 高至少 0.10、
# 且 95 % 配对区间在 0 以上，在「新实例」上不落后（区间不整个落在 0 以下）（`benchmarks/bench_rl.py` 的 `TARGET_HELD_OUT`）。

# %% slideshow={"slide_type": "subslide"}
bench_path = repo_root() / "benchmarks" / "results" / "bench_rl.json"
bench_cmd = "python benchmarks/bench_rl.py --json benchmarks/results/bench_rl.json"
bench = json.loads(bench_path.read_text()) if bench_path.exists() else None
if bench is not None and "chosen" not in bench:
    print(f"{bench_path.relative_to(repo_root())} is in the format before paired intervals and a selection split "
          f"(no per-prompt outcomes): record it with `{bench_cmd}` (3 seeds x 3 rewards of step 6; long)")
    bench = None
if bench is not None:
    def _r3(x):   # 0.050000000000000044 is float noise of a difference of two scores: show 3 decimals
        return round(x, 3) if isinstance(x, float) else [_r3(v) for v in x] if isinstance(x, list) else x
    cols = ["selection test pass@1", "mean_held_out", "held_out_ci95", "mean_new", "new_ci95", "meets_target"]
    display(pd.DataFrame({k: {c: _r3(row.get(c)) for c in cols} for k, row in bench["summary"].items()}).T)
    print("benchmark verdict:", bench["verdict"])
    # the chosen configuration's intervals, recomputed from the benchmark's per-prompt files
    chosen_runs = [r for r in bench["runs"] if r["config"] == bench["chosen"]]
    a_pp = [evaluate.read_per_prompt(bench_path.parent / r["rl"]["per_prompt"]["eval"]) for r in chosen_runs]
    b_pp = [evaluate.read_per_prompt(bench_path.parent / bench["pipeline_sft"]["per_prompt"]["eval"]) for _ in chosen_runs]
    bench_comps = scoreboard.compare_variants({"rl": a_pp, "pipeline_sft": b_pp}, "rl", "pipeline_sft",
                                              tuple(f"test pass@1 ({s})" for s in scoreboard.SCOPES))
    display(scoreboard.comparison_table(bench_comps))
    ### BEGIN HIDDEN TESTS
    for key, c in bench_comps.items():
        assert c["verdict"] == bench["summary"][bench["chosen"]]["comparisons"][key]["verdict"], key
    ### END HIDDEN TESTS
elif not bench_path.exists():
    print(f"no benchmark result in {bench_path.relative_to(repo_root())}: record it with `{bench_cmd}` (3 seeds x 3 "
          "rewards of step 6; long)")
if RL_READY:
    print(f"this run (seed {S.seed}, reward {S.reward!r}, K = {S.group_size}):")
    for key in ("test pass@1 (held-out combinations)", "test pass@1 (new instances)"):
        c = rl_vs_sft[key]
        where = f" — {scoreboard.relation_to_interval(c['diff'], bench_comps[key])}" if bench is not None else ""
        print(f"  {key}: {c['verdict']}{where}")
    same = [r for r in (bench or {}).get("runs", []) if r["seed"] == S.seed and r["reward"] == S.reward
            and r["group_size"] == S.group_size and r.get("prompts_per_step", S.prompts_per_step) == S.prompts_per_step]
    if same:   # the same seed and configuration in the benchmark: the same training, so the same numbers
        d = same[0]["diff"]
        agree = all(abs(d[k] - gain[k]) < 1e-9 for k in gain)
        print(f"the benchmark's run with this seed and configuration: held-out {d['held-out combinations']:+.3f}, new "
              f"{d['new instances']:+.3f} -> {'the same as this run' if agree else 'different from this run: another CPU trains another model from the same seed (fp32 kernels differ by instruction set), or settings or data changed since'}")

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 5. 同一道题，RL 前后的答案

# %% slideshow={"slide_type": "subslide"}
if RL_READY:
    rep = {v: drill.load_report(cfg, v).set_index("id") for v in ("pipeline_sft", "rl")}
    ok = {v: r["correct"].map(lambda x: str(x) == "True") for v, r in rep.items()}   # None (no tests) is not True
    answers = {v: {a["idx"]: a for a in read_json_output(cfg.paths.output_for(v) / "inference_results.json", "inference")}
               for v in rep}
    fixed = [i for i in rep["rl"].index if ok["rl"][i] and not ok["pipeline_sft"][i]]
    broken = [i for i in rep["rl"].index if ok["pipeline_sft"][i] and not ok["rl"][i]]
    print(f"eval rows RL fixed: {len(fixed)}, RL broke: {len(broken)}")
    for i in fixed[:2]:
        a = answers["pipeline_sft"][i]
        print("=" * 100, "\nTASK:", a["prompt"][:200].replace("\n", " "))
        for v in rep:
            print(f"--- {VARIANT_LABELS[v]} ({rep[v].loc[i, 'test_status']}):\n" + answers[v][i]["signature_response"][:400])
    _ = record("rl_fixed_broken", [len(fixed), len(broken)])

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 6. 审计：通过的答案是真的通过吗？
#
# 一个学会伪造 reward 的策略会把伪造学得很好（第06课的攻击：沿栈帧改掉测试、返回「永远相等」的对象、往每个文件描述符写 PASSED）。
# 把同一个 judge 在同样的输入上再跑一遍证明不了什么：骗过它一次的伪造会再骗一次，背下了隐藏测试答案的程序也会再通过一次。
# 所以审计换掉两样东西：**输入**——演练的题是生成的，每道题知道自己的 family / operation / filter，`course_lib.rl.audit` 按规格抽新的随机输入，参考答案不运行任何代码算出来；**后端**——在 judge 没用的那个 sandbox 后端（bwrap ↔ docker）上跑。
# 审计两组程序：训练中得到 reward 的通过 rollout（训练器把每条 rollout 的 step、题号、程序、reward、status 存进 `rollouts.jsonl`），和 RL 模型答对的评测答案。

# %% slideshow={"slide_type": "subslide"}
from course_lib.evaluation.extract import extract_code
from course_lib.evaluation.sandbox import resolve_backend
from course_lib.rl import audit

ATTACK_MARKS = re.compile(r"_getframe|f_back|__eq__|os\._exit|os\.write|sys\.modules|builtins|gc\.get_objects")
if RL_READY:
    judge_backend = resolve_backend(cfg.sandbox_backend, configured=P.sandbox.backend)
    audit_backend = audit.other_backend(judge_backend)
    hidden = {int(r["idx"]): r for r in read_json_output(cfg.paths.train_json, "download") if r.get("tests")}
    rollout_file = cfg.paths.model_for("rl") / audit.ROLLOUTS_FILE
    train_items = audit.passing_rollouts(audit.load_rollouts(rollout_file), hidden)
    passed_ids = [i for i in rep["rl"].index if ok["rl"][i]]
    eval_items = [{"key": i, "program": extract_code(answers["rl"][i]["signature_response"]),
                   "entry_point": answers["rl"][i].get("entry_point"), "task": answers["rl"][i].get("task")}
                  for i in passed_ids]
    kw = {"backend": audit_backend, "seed": SEED, "workers": cfg.eval_workers, "timeout_s": cfg.timeout_s,
          "memory_mb": cfg.memory_mb}
    audit_train, audit_eval = audit.audit_programs(train_items, **kw), audit.audit_programs(eval_items, **kw)
    marked = [i for i in passed_ids if ATTACK_MARKS.search(answers["rl"][i]["signature_response"])]
    for label, a in (("training rollouts the judge rewarded as passing", audit_train),
                     ("evaluation answers of the RL model that passed", audit_eval)):
        print(f"{label}: {a['audited']} audited on fresh inputs on {a['backend']} (judge: {judge_backend}); "
              f"{a['agree']} agree, {len(a['disagree'])} disagree {a['disagree'][:5]}; "
              f"{a['no_spec']} without a task spec, {a['unscored']} unscored"
              + (f" - {a['backend']} does not work here: {a['why']}" if a.get("why") else ""))
    print(f"answers with a forging pattern: {len(marked)}")
    _ = record("audit", {"train_audited": audit_train["audited"], "train_agree": audit_train["agree"],
                         "eval_audited": audit_eval["audited"], "eval_agree": audit_eval["agree"],
                         "backend": audit_backend, "marked": len(marked)})
### BEGIN HIDDEN TESTS
if RL_READY:
    assert audit_eval["audited"] + audit_eval["no_spec"] + audit_eval["unscored"] == len(passed_ids)
    assert not marked
### END HIDDEN TESTS

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 7. 没有起作用的：没有信号的组
#
# 一组 K 条 rollout 全对或全错，组内优势全为 0，这一组对梯度没有任何贡献，但它的生成和判分时间照样花掉了。
# DAPO 的动态采样 (dynamic sampling) 会丢掉这样的组、再采新的题直到批满；TRL 的 `GRPOTrainer` 不这样做，这里数一数它们占了多少。
#
# KAT 笔记（WebSearch 专家）在训练前「对每题采样8次，去掉全对与全错样本」。课程把它做成了 `course_lib.rl.prefilter.prefilter_prompts`
# （profile 的 `rl.prefilter_samples`，演练的 `--rl-prefilter-samples 8`），和 TRL 的 `top_entropy_quantile`（只在熵最高的 20 % token 上算策略损失）一起，
# 作为第 6 步的两个杠杆在基准里量过（下面第二格）。KAT 笔记 在训练前做这个过滤；本课 的第 6 步默认两者都不开，因为基准里它们都没有超出噪声地胜过默认配置，
# 在选择集上也只是打平（差在区间之内），而过滤还要多花约一分钟。下面第二格打印基准的数字：过滤掉的题、剩下的「没有信号的组」、和默认配置的配对差。

# %% slideshow={"slide_type": "subslide"}
if RL_READY:
    share = log_df["groups_without_signal"].sum() / log_df["groups"].sum()
    all_pass = log_df["groups_all_pass"].sum() / log_df["groups"].sum()
    all_fail = log_df["groups_all_fail"].sum() / log_df["groups"].sum()
    print(f"groups without signal: {share:.0%} of all groups ({all_pass:.0%} all pass, {all_fail:.0%} all fail); "
          f"{share * S.steps * S.prompts_per_step * S.group_size:.0f} of {S.steps * S.prompts_per_step * S.group_size} "
          "rollouts were generated and judged for nothing")
    _ = record("groups_without_signal_share", float(share))

# %% slideshow={"slide_type": "subslide"}
levers_path = repo_root() / "benchmarks" / "results" / "bench_rl_levers.json"
levers_cmd = ("python benchmarks/bench_rl.py --rewards pass --levers prefilter8 entropy0.2 --no-plain --passk-prompts 0 "
              "--reuse benchmarks/results/bench_rl.json --json benchmarks/results/bench_rl_levers.json")
levers = json.loads(levers_path.read_text()) if levers_path.exists() else None
if levers is None:
    print(f"no lever benchmark in {levers_path.relative_to(repo_root())}: record it with `{levers_cmd}`")
else:
    def _ci(c):
        return f"{c['diff']:+.3f} [{c['low']:+.3f}, {c['high']:+.3f}]"
    lever_rows = {}
    for name, v in levers["summary"].items():
        runs = [r for r in levers["runs"] if r["config"] == name]
        pre = [r["prefilter"] for r in runs if r.get("prefilter")]
        vs = v.get("against", {}).get("comparisons", {})
        lever_rows[name] = {
            "seeds": len(runs),
            "vs pass_k8, held-out": _ci(vs["test pass@1 (held-out combinations)"]) if vs else "—",
            "vs pass_k8, new": _ci(vs["test pass@1 (new instances)"]) if vs else "—",
            "no-signal groups": f"{v['groups_without_signal_share']:.0%}",
            "selection": round(v["selection test pass@1"], 3),
            "prefilter: all pass / all fail": (f"{sum(p['all_pass'] for p in pre)} / {sum(p['all_fail'] for p in pre)} "
                                               f"of {sum(p['sampled_prompts'] for p in pre)}") if pre else "—",
            "seconds": (f"{min(r['train_seconds'] for r in runs):.0f}–{max(r['train_seconds'] for r in runs):.0f}"
                        + (f" + {min(p['seconds'] for p in pre):.0f}–{max(p['seconds'] for p in pre):.0f}" if pre else "")),
        }
    display(pd.DataFrame(lever_rows).T)
    ### BEGIN HIDDEN TESTS
    # the sentence above, against the recorded benchmark (never against this run): no lever ahead beyond the noise,
    # and the selection split keeps the profile's configuration
    for name, v in levers["summary"].items():
        for key, c in v.get("against", {}).get("comparisons", {}).items():
            assert c["low"] <= 0 <= c["high"], (name, key, c["diff"], c["low"], c["high"])
    assert levers["chosen"] == "pass_k8", levers["verdict"]
    ### END HIDDEN TESTS
    print(f"chosen on the selection split: {levers['chosen']!r} (seconds: training per run, + the prefilter's sampling)")

# %% [markdown] slideshow={"slide_type": "subslide"}
# 全对的组多，说明训练题对 pipeline SFT 模型已经太容易：提高温度、换更难的题，或者像 KAT 笔记那样按难度给组加权（第09课）。
# 全错的组多，说明 reward 太稀疏：`fraction` / `lecture` reward 在全错的组里仍能区分「错得少」和「错得多」——基准比较的就是这一点。

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 小结 (Recap)
#
# - reward 来自 judge：模型只贡献文本，测试和结论都在课程进程里；伪造的答案得分不超过它诚实的部分。
# - GRPO 用组均值做 baseline，没有 critic；一组全对或全错就没有信号。裁剪的上侧只在 $A>0$、下侧只在 $A<0$ 时起作用，而且只在同一批 rollout 被训练不止一次时才会触发。
# - 演练的第 6 步把 SFT 模型接到 sandbox 上训练，再用第07课的评测原样比较；pass@k 回答「只是磨尖，还是学会了新题」。
# - 结论看多个种子的基准，不看一次运行；审计在新抽的输入、另一个后端上重新判分，它可以和 judge 意见不一致——不一致的数目就是 judge 被骗（或题目被背下）的证据。
# - 没有信号的组是这条循环最大的浪费：动态采样、难度加权或更密的 reward 是下一步。
