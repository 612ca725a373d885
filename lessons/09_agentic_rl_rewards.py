# %% [markdown] slideshow={"slide_type": "slide"}
# # 第09课 智能体 RL：优势、比率、critic、规则 reward 与在线蒸馏 (Agentic RL and rewards)
#
# 第08课让训练数据和 reward 的来源变得可信；这一课看 reward 怎样变成**梯度**。KAT-Coder 三份报告里的五个机制，各写成一段可运行、可检验的小代码：
# GRPO 的难度/熵加权、turn-level 重要性比率与 MCLA、带 hindsight critic 的非对称 PPO、三层规则 reward、带 top-k 门控的在线蒸馏 (MOPD)。

# %% [markdown] slideshow={"slide_type": "subslide"}
# **学习目标 (Learning goals)**
#
# 1. **GRPO**：组内归一化的优势 (group-normalized advantage)；按任务难度 $D_i = 1 - \text{mean success}$ 放大难组、组内按熵放大探索样本；全零优势的组保持为零；动态采样（K = 8）与 RFT 筛选。
# 2. **Turn-level ratio、IcePop 与 MCLA**（V2）：每一轮 (turn) 一个重要性比率并各自裁剪；训推概率比越界的 token 不学；平均 $K$ 次 prefill 的 log-prob 压低噪声。
# 3. **Asymmetric PPO**（V2.5）：actor 只看历史，critic 额外读 hindsight；标准 clipped PPO + GAE，critic 回归 GAE return；hindsight 与普通 critic 在 10 个种子上比较。
# 4. **三层规则 reward**（V2.5）：任务成功 > 行为惩罚（单轮重复调用等）> 失败轨迹的进度分（F2 文件定位、部分测试通过）。
# 5. **MOPD**（V2.5）：冷启动、多教师路由、学生采样老师打分的逐 token reverse KL、top-k 加权与动态截断、长度分层组 batch。
#
# 参考：*KAT-Coder Technical Report*（V1，arXiv 2510.18779）；*KAT-Coder-V2 Technical Report*（V2）；*KAT-Coder-V2.5 Technical Report*（arXiv 2607.05471）。
# 本课的玩具设定 (toy settings) 是为教学写的，不是报告里的原始超参数。

# %% slideshow={"slide_type": "skip"} tags=["parameters"]
PROFILE = "ci"   # "ci" (CPU, offline) or "full" (GPU + internet)
SEED = 0

# %% slideshow={"slide_type": "skip"}
import json

import matplotlib.pyplot as plt
import numpy as np
import torch

from course_lib import exercises, get_profile, record
from course_lib.agentic import load_lesson_model
from course_lib.agentic.grpo import (difficulty_weights, dynamic_sampling_filter, length_stratified_batches, weighted_advantages)
from course_lib.agentic.turns import (icepop_mask, ratio_noise_by_k, sequence_ratios, token_logprobs, token_ratios,
                                      turn_level_loss, turn_ratios)
from course_lib.agentic.critic import CRITICS, ToyTask, advantage_quality, ppo_experiment
from course_lib.agentic.rule_rewards import Rollout, ToolCall, Trajectory, rft_select, rule_reward
from course_lib.agentic.distill import (cold_start, gate_weights, mean_reverse_kl, on_policy_distill, route_teachers,
                                        sample_continuations, weaken)

P = get_profile(PROFILE).agentic
torch.manual_seed(SEED)
torch.set_num_threads(1)   # tiny models: one thread is fastest, and never oversubscribes a busy machine
model, model_note = load_lesson_model(PROFILE, attn="eager", seed=SEED)
VOCAB = model.config.vocab_size
print("model:", model_note)


# %% [markdown] slideshow={"slide_type": "slide"}
# ## 1. GRPO 与它的加权
#
# GRPO 为每个任务采样一组 (group) $G$ 条 rollout，用组本身做 baseline：
# $$A_i = \frac{r_i - \operatorname{mean}(r)}{\operatorname{std}(r) + \epsilon}$$
# KAT-Coder V1 在此之上做两种重加权（这里是课程的简化版）。KAT 笔记：「任务组成功率为r̄ᵢ，难度定义为Dᵢ=1−r̄ᵢ」；「难度高于 batch 平均的组获得更大缩放权重」；
# 「同组中，策略熵高于平均的样本再增加权重」；「全零优势不会凭空变为奖励」。
#
# - **任务难度** $D = 1 - \text{组内平均成功率}$：比 batch 平均更难的组乘以 $D_i / \bar D > 1$，简单组 $< 1$；
# - **组内熵**：平均 token 熵更高（更「探索」）的样本乘以 $H_j / \bar H$（裁剪到 $[0.5, 2]$）。
#
# 讲义只说熵高于平均的样本增加权重；本课把这个权重裁剪到 $[0.5, 2]$，因为不设上限时，一个熵极高的样本会独占整组的更新。
#
# 所有权重都**乘在优势上**：全对或全错的组优势为零，加权后仍为零——不会凭空制造学习信号。

# %% [markdown] slideshow={"slide_type": "subslide"}
# ### 练习 1：组内优势
#
# 写 `my_group_advantages(rewards, eps=1e-6)`：返回 numpy 数组 $(r - \bar r) / (\sigma + \epsilon)$，$\sigma$ 用**总体标准差**（`ddof=0`）。

# %% slideshow={"slide_type": "-"}
def my_group_advantages(rewards, eps=1e-6):
    ### BEGIN SOLUTION
    r = np.asarray(rewards, dtype=np.float64)
    return (r - r.mean()) / (r.std() + eps)
    ### END SOLUTION


my_group_advantages = exercises.check("09-1", my_group_advantages)

# %% slideshow={"slide_type": "subslide"}
groups = [[1, 1, 1, 0, 1, 1, 1, 1],      # easy task
          [1, 0, 0, 0, 0, 1, 0, 0],      # hard task
          [0, 0, 0, 0, 0, 0, 0, 0],      # all fail: no signal
          [1, 0, 1, 0, 1, 0, 1, 0]]      # medium
rng = np.random.default_rng(SEED)
entropies = [list(rng.uniform(0.5, 2.0, 8)) for _ in groups]
plain = [my_group_advantages(g) for g in groups]
weighted = weighted_advantages(groups, entropies)
print("difficulty weights per group:", np.round(difficulty_weights(groups), 2))
fig, axes = plt.subplots(1, len(groups), figsize=(13, 2.8), sharey=True)
for i, ax in enumerate(axes):
    x = np.arange(8)
    ax.bar(x - 0.2, plain[i], 0.4, label="plain GRPO")
    ax.bar(x + 0.2, weighted[i], 0.4, label="difficulty x entropy")
    ax.set_title(f"group {i}: success {np.mean(groups[i]):.2f}", fontsize=9); ax.axhline(0, c="k", lw=0.5)
axes[0].legend(fontsize=7); axes[0].set_ylabel("advantage"); plt.tight_layout(); plt.show()
record("grpo_all_fail_group_abs_sum", float(np.abs(weighted[2]).sum()))
_ = record("grpo_hard_over_easy_weight", float(difficulty_weights(groups)[1] / difficulty_weights(groups)[0]))

# %% [markdown] slideshow={"slide_type": "subslide"}
# ### 动态采样与 RFT 筛选（KAT-Coder-V2 WebSearch 专家）
#
# KAT 笔记：「先剔除不用工具也能回答的问题；再对每题采样8次，去掉全对与全错样本」——全对、全错的组优势全为 0，留在 batch 里只占算力。
# KAT 笔记：「保留答案正确、无失败工具调用、无重复查询的正轨迹，执行 RFT」。

# %% slideshow={"slide_type": "-"}
rng_ds = np.random.default_rng(SEED)
pass_rates = rng_ds.uniform(0, 1, 64) ** 2                     # 64 questions of mixed difficulty
sampled = [list((rng_ds.random(8) < p).astype(int)) for p in pass_rates]   # K = 8 rollouts each
kept = dynamic_sampling_filter(sampled, k=8)
print(f"dynamic sampling keeps {len(kept)} of {len(sampled)} groups "
      f"({sum(sum(g) == 8 for g in sampled)} all-correct, {sum(sum(g) == 0 for g in sampled)} all-wrong dropped)")
q = lambda text, turn: ToolCall("search", json.dumps({"q": text}), turn=turn)
candidates = [Rollout(True, [q("kwai coder", 0), q("kat-coder v2 tree training", 1)], [False, False]),
              Rollout(True, [q("kwai coder", 0), q("kwai coder", 1)], [False, False]),        # the same query twice
              Rollout(True, [q("kat coder", 0)], [True]),                                       # a failed tool call
              Rollout(False, [q("kat coder", 0)], [False])]                                     # wrong answer
print("RFT keeps rollouts", rft_select(candidates), "of", len(candidates))
record("dynamic_sampling_kept", len(kept))
_ = record("rft_kept", rft_select(candidates))

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 2. Turn-level ratio 与 MCLA（KAT-Coder-V2）
#
# PPO/GRPO 用重要性比率 $\rho = \pi_\theta / \pi_{\text{old}}$ 修正 off-policy 偏差并裁剪到 $[1-\epsilon, 1+\epsilon]$。三种粒度：
#
# | 粒度 | 比率 | 问题 |
# |---|---|---|
# | token | 每个 token 一个 | 噪声大 |
# | trajectory | 全轨迹 log-ratio 的平均再取 exp | 一个漂移的 turn 决定整条 50 轮轨迹是否被裁剪 |
# | **turn** | 每个 assistant turn 内的几何平均 | 只裁剪漂移的那一轮 |

# %% [markdown] slideshow={"slide_type": "-"}
# KAT 笔记：「按 Harness 动作边界把轨迹拆为若干 turn，每一 turn 单独计算新旧策略概率比并裁剪」；「避免整条轨迹共用一个 ratio；优势仍来自组级回报信号」。
#
# 下面是一条 `turn_episode_turns` 轮（ci 60 轮）、每轮 8 个 token 的轨迹，只有第 30 轮漂移：新策略下它的 token 概率翻倍（ratio 2）。其余各轮只有很小的噪声。

# %% slideshow={"slide_type": "subslide"}
N_TURNS, PER_TURN = P.turn_episode_turns, 8
T = N_TURNS * PER_TURN
gen = torch.Generator().manual_seed(SEED)
logp_old = torch.log(torch.full((1, T), 0.4))
logp_new = logp_old + 0.02 * torch.randn(1, T, generator=gen)
drift = slice(30 * PER_TURN, 31 * PER_TURN)
logp_new[0, drift] = logp_old[0, drift] + np.log(2.0)
turns = torch.arange(N_TURNS).repeat_interleave(PER_TURN)[None]; mask = torch.ones(1, T)
r_tok, r_turn, r_seq = token_ratios(logp_new, logp_old), turn_ratios(logp_new, logp_old, turns, mask), sequence_ratios(logp_new, logp_old, mask)
lp = logp_new.clone().requires_grad_(True)
(grad,) = torch.autograd.grad(turn_level_loss(lp, logp_old, torch.ones(1, T), turns, mask, clip_eps=0.2), lp)
fig, ax = plt.subplots(figsize=(10, 3))
ax.plot(r_tok[0], ".", ms=2, label="token ratio", alpha=0.5); ax.step(range(T), r_turn[0], where="mid", label="turn ratio")
ax.plot(r_seq[0], "--", label="trajectory ratio"); ax.axhspan(0.8, 1.2, color="gray", alpha=0.15, label="clip range")
clipped_tokens = (grad[0] == 0).nonzero().flatten()
ax.plot(clipped_tokens, np.full(len(clipped_tokens), 0.75), "rx", ms=3, label="clipped (no gradient)")
ax.set_xlabel("token"); ax.set_ylabel("ratio"); ax.legend(fontsize=7, loc="upper left")
plt.tight_layout(); plt.show()
clipped_turns = sorted(set(turns[0, clipped_tokens].tolist()))
print(f"{N_TURNS} turns x {PER_TURN} tokens; the drifted turn's ratio {r_turn[0, drift][0]:.2f}")
print(f"trajectory ratio {r_seq[0, 0]:.3f}: inside [0.8, 1.2], so one ratio per trajectory clips nothing and the drifted turn "
      f"gets a full update; turn-level clips {len(clipped_tokens)} tokens, all in turn(s) {clipped_turns}")
record("turn_episode_turns", N_TURNS)
record("turn_trajectory_ratio", float(r_seq[0, 0]))
_ = record("turn_clipped_turns", clipped_turns)

# %% [markdown] slideshow={"slide_type": "subslide"}
# ### IcePop：训推不一致的 token 不学
#
# KAT 笔记：「配合 IcePop 抑制差异过大的 token，并对齐采样与训练路由，分别处理估计波动与训推错位」。
# 采样引擎 (inference) 和训练引擎 (train) 对同一 token 算出的概率应该一致；比值 $p_\text{train}/p_\text{infer}$ 超出 $[0.5, 2]$ 的 token 是训推错位，不是学习信号：mask 设为 0。
# 讲义没有给出区间；本课用 $[0.5, 2]$，因为它对称（对数尺度）且容易读。

# %% slideshow={"slide_type": "-"}
gen = torch.Generator().manual_seed(SEED + 7)
logp_infer = torch.log(torch.rand(1, 200, generator=gen).clamp(min=0.05))
logp_train = logp_infer + 0.05 * torch.randn(1, 200, generator=gen)
mismatch = torch.randperm(200, generator=gen)[:6]
logp_train[0, mismatch] += torch.tensor([1.5, -1.5, 2.0, -2.0, 1.0, -1.2])     # six tokens the engines disagree on
keep = icepop_mask(logp_train, logp_infer, torch.ones(1, 200), low=0.5, high=2.0)
dropped = (keep[0] == 0).nonzero().flatten().tolist()
print(f"IcePop keeps {int(keep.sum())} of 200 tokens; dropped {dropped}; planted mismatches {sorted(mismatch.tolist())}")
_ = record("icepop_dropped_planted", sorted(dropped) == sorted(mismatch.tolist()))

# %% [markdown] slideshow={"slide_type": "subslide"}
# ### MCLA：平均 $K$ 次 prefill 的 log-prob
#
# 大规模 MoE 模型里，训练端重算的 log-prob 带噪声（路由、kernel 非确定性），即使策略没变比率也不等于 1。
# MCLA 把同一批 token 做 $K$ 次 prefill，取 log-prob 的平均（报告用 $K=8$），噪声方差约降为 $1/K$。
# KAT 笔记：「对同一轨迹 prefill K=8次，平均 logprob 后用于估计，降低概率噪声对策略更新的影响」。
# 这里用**打开 dropout 的模型**模拟路由噪声：比较两个独立估计的 log-ratio（理想值 0）的标准差。

# %% slideshow={"slide_type": "-"}
for module in model.modules():                   # dropout in attention = our stand-in for routing noise
    if hasattr(module, "attention_dropout"):
        module.attention_dropout = 0.1
model.train()
ids = torch.randint(0, VOCAB, (4, 32), generator=torch.Generator().manual_seed(SEED))
noise = ratio_noise_by_k(lambda: token_logprobs(model, ids), ks=tuple(P.mcla_ks), trials=P.mcla_trials)
for module in model.modules():                   # put the model back as it was: no dropout, eval mode
    if hasattr(module, "attention_dropout"):
        module.attention_dropout = 0.0
model.eval()
ks = list(noise)
fig, ax = plt.subplots(figsize=(6, 3.2))
ax.loglog(ks, [noise[k] for k in ks], "o-", label="measured std of log-ratio")
ax.loglog(ks, [noise[ks[0]] / np.sqrt(k / ks[0]) for k in ks], "--", label=r"$\propto 1/\sqrt{K}$")
ax.set_xlabel("K prefills averaged"); ax.set_ylabel("noise"); ax.legend(); plt.tight_layout(); plt.show()
for k in ks:
    print(f"K={k}: std of log-ratio {noise[k]:.4f}")
_ = record("mcla_noise", {str(k): v for k, v in noise.items()})

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 3. 非对称 PPO 与 hindsight critic（KAT-Coder-V2.5）
#
# KAT 笔记：
# - 「Actor：只读取当前可用历史，包括工具输出、文件片段和压缩摘要」；
# - 「Critic：额外读取最终成败、测试分布、覆盖率、patch 差异、后续轮次等 hindsight 信息」；「Critic 学习V(s_t,c_t)；其中c_t是训练时可见的额外信息，部署只保留 Actor」；
# - 「用奖励和前后状态的 Value 计算 TD 误差，再通过 GAE 聚合为各位置的优势」；「Actor 按标准 clipped PPO 更新；Critic 回归 GAE 构造的 return target」。
#
# GAE：$\delta_t = r_t + \gamma V(s_{t+1}, c_{t+1}) - V(s_t, c_t)$，$A_t = \delta_t + \gamma\lambda A_{t+1}$；critic 的目标是 $A_t + V(s_t, c_t)$。
#
# **为什么 V2.5 换成 PPO？** KAT 笔记：「压缩或分支后前缀不同的样本仍可分别估值，不必强行放入共享前缀的 GRPO 分组」，以及「Asymmetric PPO 改善长程信用分配」。
# GRPO 的 baseline 是同一 prompt 的一组 rollout；上下文被压缩、sub-agent 分支之后，样本不再共享前缀，组就凑不起来；而 critic 给每个位置单独估值，长轨迹里每一步都有自己的优势。
#
# **玩具任务**（课程自己的设定）：第 0 步「定位文件」（跟随 issue 的提示——提示 60% 正确——或随便挑一个），接着若干步编辑（好 / 马虎）；文件对、编辑都好、且测试在正确修复后能通过，reward 才是 1（只在最后一步）。
# actor 的每一步只是一个 Bernoulli logit（它什么隐藏信息都看不到）。三个 critic（表格型，按各自看到的特征分桶）：
#
# | critic | 读到的 $c_t$ |
# |---|---|
# | `history`（普通 critic） | 只有历史：第几步、是否跟随提示、已有几步好编辑 |
# | `hindsight` | + patch 差异（定位的文件是不是 gold patch 的文件）+ 测试分布（这个任务的测试在正确修复后能否通过） |
# | `outcome` | + 最终成败 + 后续轮次（之后还有几步好编辑） |

# %% slideshow={"slide_type": "subslide"}
task = ToyTask()
q = advantage_quality(task, n_fit=P.critic_fit_episodes, n_eval=4000, seed=SEED)
for kind in CRITICS:
    print(f"{kind:<10} std(A_t) per step {np.round(q[kind]['adv_std'], 3)}  "
          f"mean edit-step A when the file was wrong {q[kind]['edit_adv_wrong_file']:+.3f}  "
          f"policy-gradient mean {np.round(q[kind]['grad_mean'], 3)}")
fig, axes = plt.subplots(1, 2, figsize=(11, 3.4))
steps = np.arange(task.steps); w = 0.27
for i, kind in enumerate(CRITICS):
    axes[0].bar(steps + (i - 1) * w, q[kind]["adv_std"], w, label=kind)
axes[0].set_xticks(steps); axes[0].set_xticklabels(["locate"] + [f"edit {e+1}" for e in range(task.edit_steps)])
axes[0].set_ylabel("std of advantage"); axes[0].set_title("variance of advantages (critic fitted to the start policy)")
axes[0].legend(fontsize=8)
labels = ["A(locate) | right file", "A(locate) | wrong file", "A(edits) | wrong file"]
for i, kind in enumerate(CRITICS[:2]):
    vals = [q[kind]["a0_right_file"], q[kind]["a0_wrong_file"], q[kind]["edit_adv_wrong_file"]]
    axes[1].bar(np.arange(3) + (i - 0.5) * 0.4, vals, 0.4, label=kind)
axes[1].set_xticks(range(3)); axes[1].set_xticklabels(labels, fontsize=8); axes[1].axhline(0, c="k", lw=0.5)
axes[1].set_title("where the credit goes"); axes[1].legend(fontsize=8)
plt.tight_layout(); plt.show()
record("critic_adv_std", {k: q[k]["adv_std"] for k in CRITICS})
_ = record("critic_edit_blame_wrong_file", {k: q[k]["edit_adv_wrong_file"] for k in CRITICS})

# %% [markdown] slideshow={"slide_type": "subslide"}
# 上面的 critic 是在起始策略的大量回合上精确拟合的（表格均值），读图：
#
# - **方差**：hindsight critic 每一步的优势标准差都比 history critic 小（打印的数字）；
# - **位置**：文件选错时，history critic 把负优势分摊到之后的编辑步骤；hindsight critic 的编辑步骤优势 ≈ 0，负优势落在「定位」这一步（右图）。
#
# **课程的分析（不是讲义的内容）：看到结果的 critic 能做什么、不能做什么。** 讲义列出的 hindsight 包括「最终成败」和「后续轮次」。
# 在这个玩具里，一个**精确拟合**的表格 critic 一旦读到最终成败，就有 $V(s_t, c_t) = R$，每个 TD 误差都是 0，优势处处为 0（`outcome` 的标准差一栏）——它把信用分配掉了，却不留下任何学习信号。
# 真实的 critic 是一个从文本里读这些信息的网络，不会精确拟合；它能从结果信息里得到的，是更准的价值估计，而不是可以照抄的答案。
# 只读「与 agent 之后动作无关」的环境事实（patch 差异、测试分布）时，baseline 不改变策略梯度的期望：上面两种 critic 的 policy-gradient mean 在抽样误差内相同。

# %% [markdown] slideshow={"slide_type": "subslide"}
# ### 实验：hindsight critic vs 普通 critic，长一点的任务、多个种子
#
# 任务换成「定位 + `ppo_edit_steps` 步编辑」（ci 10 步，共 11 步，起步时成功率很低，见下面打印的前 5 轮）。每个 critic 用 `ppo_seeds` 个种子（ci 10 个）各训练 `ppo_iterations` 轮：
# 每轮 64 个回合、actor 在这批上做 4 步 clipped PPO（$\epsilon = 0.2$）、critic 向 GAE return 回归（学习率 0.1）。报告最后 10 轮的成功率和整个训练中优势的标准差，均值 ± 种子间标准差。

# %% slideshow={"slide_type": "-"}
long_task = ToyTask(edit_steps=P.ppo_edit_steps)
ppo = ppo_experiment(long_task, CRITICS, seeds=P.ppo_seeds, iterations=P.ppo_iterations)
fig, axes = plt.subplots(1, 2, figsize=(11, 3.4))
for kind, res in ppo.items():
    m, sd = res["curves"].mean(0), res["curves"].std(0, ddof=1)
    axes[0].plot(m, label=f"{kind} critic"); axes[0].fill_between(range(len(m)), m - sd, m + sd, alpha=0.2)
axes[0].set_xlabel("PPO iteration (64 episodes)"); axes[0].set_ylabel("success rate (mean ± sd over seeds)")
axes[0].legend(fontsize=8)
axes[1].boxplot([ppo[k]["final"] for k in CRITICS]); axes[1].set_xticks(range(1, len(CRITICS) + 1), CRITICS)
axes[1].set_ylabel("success, last 10 iterations"); axes[1].set_title(f"{P.ppo_seeds} seeds per critic", fontsize=9)
plt.tight_layout(); plt.show()
for kind, res in ppo.items():
    print(f"{kind:<10} success first 5 iterations {res['curves'][:, :5].mean():.3f}, "
          f"last 10 {res['final_mean']:.3f} ± {res['final_std']:.3f}   "
          f"advantage std {res['adv_std_mean']:.3f} ± {res['adv_std_sd']:.3f}   (mean ± sd over {P.ppo_seeds} seeds)")
diff = ppo["hindsight"]["final"] - ppo["history"]["final"]
print(f"hindsight - history, paired by seed: {diff.mean():+.3f} ± {diff.std(ddof=1):.3f}")
record("ppo_final", {k: [ppo[k]["final_mean"], ppo[k]["final_std"]] for k in CRITICS})
record("ppo_adv_std", {k: [ppo[k]["adv_std_mean"], ppo[k]["adv_std_sd"]] for k in CRITICS})
_ = record("ppo_hindsight_minus_history", [float(diff.mean()), float(diff.std(ddof=1))])
### BEGIN HIDDEN TESTS
assert ppo["hindsight"]["adv_std_mean"] < ppo["history"]["adv_std_mean"]
assert abs(diff.mean()) < max(ppo["history"]["final_std"], ppo["hindsight"]["final_std"])
assert ppo["outcome"]["final_mean"] < min(ppo["history"]["final_mean"], ppo["hindsight"]["final_mean"])
### END HIDDEN TESTS

# %% [markdown] slideshow={"slide_type": "-"}
# 读数（以上面打印的数字为准）：hindsight critic 的优势标准差比普通 critic 小；最后的成功率两者的差距小于种子间的标准差——在这个玩具任务上，更小的优势方差没有变成可测的更快学习。
# 读到最终成败和后续轮次的 `outcome` critic 学得最差：优势被它解释掉了。这与笔记归纳里的建议一致：「分别检查过程奖励与 hindsight Critic 的贡献，识别额外监督是否真正改善困难决策」。

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 4. 三层规则 reward（KAT-Coder-V2.5）
#
# KAT 笔记：「权重最高；要求全部Fail-to-Pass与Pass-to-Pass通过」；「惩罚重复文本、乱码、错误参数、把工具调用写进推理字段、单轮重复调用及过度并行」；
# 「文件定位用F₂兼顾精确率与召回率；部分测试通过也能提供奖励」；「让完整解决任务保持最高优先级」。本课实现其中的重复文本、错误参数和单轮重复调用三项惩罚。
#
# 1. **任务成功**（权重最高）：所有 Fail-to-Pass 测试通过，且没有 Pass-to-Pass 测试被破坏；
# 2. **行为惩罚**：重复文本、格式错误的工具参数、**同一轮 (turn) 内**重复的相同调用——改完代码后在下一轮重跑同一条测试命令是验证修复，不罚；
# 3. **进度分**（仅失败轨迹）：文件定位用 **F2** 打分（召回比精确更重要：漏掉要改的文件比多打开一个文件更糟），加上 F2P 测试的通过比例；有上限，任何失败都不会超过成功。
#
# $$F_\beta = \frac{(1+\beta^2)\,P\,R}{\beta^2 P + R},\quad \beta = 2$$

# %% [markdown] slideshow={"slide_type": "subslide"}
# ### 练习 2：F2 定位分
#
# `my_f_beta(predicted, gold, beta=2.0)`：`predicted`、`gold` 是文件路径列表（按集合处理）。两者都空返回 1.0；没有交集返回 0.0。

# %% slideshow={"slide_type": "-"}
def my_f_beta(predicted, gold, beta=2.0):
    ### BEGIN SOLUTION
    pred, gold = set(predicted), set(gold)
    if not pred and not gold:
        return 1.0
    tp = len(pred & gold)
    if tp == 0:
        return 0.0
    p, r = tp / len(pred), tp / len(gold)
    return (1 + beta ** 2) * p * r / (beta ** 2 * p + r)
    ### END SOLUTION


my_f_beta = exercises.check("09-2", my_f_beta)

# %% slideshow={"slide_type": "subslide"}
F2P, P2P, GOLD = ["test_new_1", "test_new_2"], ["test_old_1", "test_old_2"], ["src/calc.py"]
SCHEMAS = {"read_file": ["path"], "edit_file": ["path", "patch"]}
ok = {"test_new_1": True, "test_new_2": True, "test_old_1": True, "test_old_2": True}
SCHEMAS["run_tests"] = ["cmd"]
read = ToolCall("read_file", '{"path": "src/calc.py"}', turn=0)
edit = ToolCall("edit_file", '{"path": "src/calc.py", "patch": "..."}', turn=1)
run_t = lambda turn: ToolCall("run_tests", '{"cmd": "pytest tests/test_calc.py"}', turn=turn)
scenarios = {
    "success": Trajectory("fixed it", [read, edit], ["src/calc.py"], ok),
    "success, verified": Trajectory("fixed it", [run_t(0), read, edit, run_t(2)], ["src/calc.py"], ok),
    "success, loopy": Trajectory("let me retry the edit " * 15,
                                 [read, ToolCall(read.name, read.arguments, turn=0), run_t(2), run_t(2),
                                  ToolCall("edit_file", "{oops", turn=3)], ["src/calc.py"], ok),
    "half the F2P": Trajectory("partial", [read], ["src/calc.py"], dict(ok, test_new_2=False)),
    "right file, no pass": Trajectory("tried", [read], ["src/calc.py"], dict(ok, test_new_1=False, test_new_2=False)),
    "broke a P2P": Trajectory("oops", [read], ["src/calc.py"], dict(ok, test_old_1=False)),
    "wrong file": Trajectory("tried", [read], ["src/util.py"], dict(ok, test_new_1=False, test_new_2=False)),
}
rewards = {name: rule_reward(t, F2P, P2P, GOLD, SCHEMAS) for name, t in scenarios.items()}
fig, ax = plt.subplots(figsize=(9, 3.2))
names = list(rewards)
succ = [rewards[n]["success"] for n in names]; prog = [rewards[n]["progress"] for n in names]
pen = [-rewards[n]["penalty"] for n in names]
ax.bar(names, succ, label="success"); ax.bar(names, prog, bottom=succ, label="progress")
ax.bar(names, pen, label="penalty", color="tab:red")
ax.plot(names, [rewards[n]["reward"] for n in names], "kD", label="total")
ax.axhline(0, c="k", lw=0.5); ax.legend(fontsize=8); ax.tick_params(axis="x", labelsize=8)
plt.tight_layout(); plt.show()
for n in names:
    r = rewards[n]
    print(f"{n:<22} reward {r['reward']:+.3f}  (success {r['success']:.0f}, progress {r['progress']:.3f}, "
          f"penalty {r['penalty']:.3f}, F2 {r['localisation_f2']:.2f})")
_ = record("rule_rewards", {n: rewards[n]["reward"] for n in names})

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 5. On-policy distillation 与 top-k 门控（KAT-Coder-V2.5 MOPD）
#
# **离线蒸馏**让学生模仿老师写出的文本；**在线蒸馏 (on-policy distillation)** 让学生自己采样，老师给学生自己的前缀逐 token 打分：
# $$\mathcal{L} = \sum_t w_t \,\mathrm{KL}\big(\pi_s(\cdot\mid x_{<t}) \,\|\, \pi_t(\cdot\mid x_{<t})\big)$$
#
# KAT 笔记：「SWE、通用 Agent、Terminal、WebCoding、通用知识分别训练专家」；「学生自己 rollout；对应领域教师在同一前缀上提供 token 分布」；
# 「用reverse KL让学生分布靠近教师，避免只学习教师轨迹却无法处理自己的错误前缀」。reverse KL 是 mode-seeking 的：把学生从老师认为不可能的 token 上推开。
#
# MOPD 的四个部件，下面各跑一小段：冷启动、多教师路由、top-k 加权与动态截断、长度分层组 batch。

# %% [markdown] slideshow={"slide_type": "subslide"}
# ### 多教师路由与冷启动
#
# KAT 笔记（V2）：「学生在混合领域任务上 rollout，每题选择表现最好的领域专家作为 Teacher」。KAT 笔记（V2.5）：「先用专家轨迹做学生冷启动，使学生具备基本行为能力，再进入 on-policy 阶段」。
# 路由表里的分数是课程编的示例；冷启动在本课的小模型上做：老师采样、学生用交叉熵学老师的轨迹（学习率 `distill_lr`）。
# 冷启动之后学生离老师是近了还是远了，看打印的 held-out KL；老师是随机初始化的模型时（见第一行输出），它的采样接近均匀分布，能学的东西很少。

# %% slideshow={"slide_type": "-"}
expert_scores = {"SWE": {"swe": 0.71, "terminal": 0.42}, "Terminal": {"swe": 0.35, "terminal": 0.63},
                 "WebCoding": {"webcoding": 0.80}, "General Agent": {"agent": 0.66, "swe": 0.40},
                 "General knowledge": {"qa": 0.74}}
domains = ["swe", "terminal", "webcoding", "agent", "qa", "swe"]
routes = route_teachers(domains, expert_scores)
for d, r in zip(domains, routes):
    print(f"task in {d:<10} -> teacher {r}")

teacher = model.eval()
trained_teacher = getattr(model, "lesson_model_kind", "") == "tiny"
noise_scale = P.distill_noise if trained_teacher else P.distill_fallback_noise
lr = P.distill_lr if trained_teacher else P.distill_fallback_lr
prompts = torch.randint(0, VOCAB, (8, 4), generator=torch.Generator().manual_seed(SEED))
held_prompts = torch.randint(0, VOCAB, (16, 4), generator=torch.Generator().manual_seed(SEED + 99))
held_out = sample_continuations(teacher, held_prompts, P.distill_new_tokens, seed=SEED + 99)   # the teacher's own text
student = weaken(teacher, noise=noise_scale, seed=SEED + 1)
kl_start = mean_reverse_kl(student, teacher, held_out, 4)
cs_losses = cold_start(student, teacher, prompts, steps=P.distill_steps // 2, max_new_tokens=P.distill_new_tokens,
                       lr=P.distill_lr, seed=SEED)
kl_cold = mean_reverse_kl(student, teacher, held_out, 4)
print(f"\nteacher: {model_note}\nstudent: the teacher + Gaussian noise ({noise_scale} x each weight's std); lr {lr}")
print(f"cold start: cross-entropy on the teacher's samples {cs_losses[0]:.3f} -> {cs_losses[-1]:.3f}; "
      f"reverse KL on held-out sequences {kl_start:.3f} -> {kl_cold:.3f}")
record("mopd_routes", routes)
_ = record("mopd_cold_start_kl", [kl_start, kl_cold])

# %% [markdown] slideshow={"slide_type": "subslide"}
# ### top-k 一致性加权与动态截断
#
# KAT 笔记：「学生长轨迹逐渐偏离教师熟悉的状态时，教师在该前缀上的分布也可能不可靠」；「比较教师与学生Top-k token的重叠比例；重叠越低，KL 监督权重越小」；
# 「连续若干 token 低于阈值时，截断其后的梯度，保留此前有效前缀」。讲义没有给出阈值和「若干」；本课用阈值 0.25、连续 4 个，因为在 12 个 token 的示例里能看清。

# %% slideshow={"slide_type": "-"}
ov = torch.tensor([[0.9, 0.8, 0.1, 0.2, 0.7, 0.1, 0.0, 0.1, 0.1, 0.9, 1.0, 0.8]])
w = gate_weights(ov, threshold=0.25, run=4)
fig, ax = plt.subplots(figsize=(8, 2.6))
ax.bar(range(12), ov[0], color="lightgray", label="top-k overlap")
ax.bar(range(12), w[0], color="tab:green", alpha=0.8, label="weight after gating")
ax.axhline(0.25, ls="--", c="gray"); ax.set_xlabel("generated token"); ax.legend(fontsize=8)
ax.set_title("after 4 low-overlap tokens in a row, the rest of the sequence gets no gradient", fontsize=9)
plt.tight_layout(); plt.show()
print("weights:", [round(x, 2) for x in w[0].tolist()])

# %% [markdown] slideshow={"slide_type": "subslide"}
# ### 在线阶段，以及门控的消融（有门控 vs 无门控）
#
# 冷启动之后的学生进入 on-policy 阶段。门控到底有没有用，是一个要测的问题：同样的学生、同样的步数，分别用门控和不用门控训练，`distill_ablation_seeds` 个种子（ci 3 个），
# 在固定的 held-out 序列（老师自己采样的 16 条）上量 reverse KL。结果照实报告。

# %% slideshow={"slide_type": "-"}
history = on_policy_distill(student, teacher, prompts, steps=P.distill_steps, max_new_tokens=P.distill_new_tokens,
                            lr=lr, k=P.distill_topk, seed=SEED)
kl_online = mean_reverse_kl(student, teacher, held_out, 4)
print(f"on-policy stage: held-out reverse KL {kl_cold:.3f} -> {kl_online:.3f}; "
      f"top-k overlap on its samples {history[0]['overlap']:.2f} -> {history[-1]['overlap']:.2f}")
ablation = {"gate": [], "no gate": []}
for s in range(P.distill_ablation_seeds):
    for label, gated in (("gate", True), ("no gate", False)):
        stu = weaken(teacher, noise=noise_scale, seed=SEED + 10 + s)
        on_policy_distill(stu, teacher, prompts, steps=P.distill_steps, max_new_tokens=P.distill_new_tokens, lr=lr,
                          k=P.distill_topk, gated=gated, seed=SEED + s)
        ablation[label].append(mean_reverse_kl(stu, teacher, held_out, 4))
fig, ax = plt.subplots(figsize=(6, 3))
for x, vals in enumerate(ablation.values()):
    ax.plot([x] * len(vals), vals, "o", alpha=0.7); ax.plot([x - 0.2, x + 0.2], [np.mean(vals)] * 2, "k-")
ax.set_xticks([0, 1], list(ablation)); ax.set_ylabel("held-out reverse KL after training")
ax.set_title(f"{P.distill_ablation_seeds} seeds; lower is closer to the teacher", fontsize=9); plt.tight_layout(); plt.show()
for label, vals in ablation.items():
    print(f"{label:<8} held-out KL {np.mean(vals):.3f} ± {np.std(vals, ddof=1):.3f}  (per seed {np.round(vals, 3)})")
gap = np.mean(ablation["gate"]) - np.mean(ablation["no gate"])
print(f"gate - no gate: {gap:+.3f} held-out KL ({'the gate ends closer to the teacher' if gap < 0 else 'no gate ends closer to the teacher'})")
record("mopd_kl_online", [kl_cold, kl_online])
_ = record("mopd_gate_ablation", ablation)

# %% [markdown] slideshow={"slide_type": "-"}
# 读数以上面打印的为准。门控要防的是学生漂到老师不熟悉的长上下文；这个设定里学生是老师加噪声得到的、序列也很短，没有这种漂移，
# 所以这个消融量到的只是门控在没有漂移时的得失，不是它在长轨迹上的作用。

# %% [markdown] slideshow={"slide_type": "subslide"}
# ### 长度分层组 batch
#
# KAT 笔记：「通过长度分层组 batch，避免长轨迹被截断后逐渐退出训练分布」。按长度把样本分成若干层，每个 batch 从每一层取同样多的样本：长轨迹出现在每个 batch 里。

# %% slideshow={"slide_type": "-"}
lengths = np.random.default_rng(SEED).lognormal(7, 1, 64).astype(int)
batches = length_stratified_batches(lengths, batch_size=8, num_strata=4, seed=SEED)
longest_quarter = set(np.argsort(lengths)[-16:].tolist())
per_batch = [sum(i in longest_quarter for i in b) for b in batches]
print(f"{len(batches)} batches of 8; samples from the longest quarter in each batch: {per_batch}")
_ = record("stratified_long_per_batch", per_batch)

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 小结 (Recap)
#
# - **GRPO 加权**：难组放大、探索样本放大，但只乘在优势上——全零组永远为零。
# - **Turn-level ratio**：只裁剪漂移的那一轮；**MCLA**：平均 $K$ 次 prefill，log-ratio 噪声 $\propto 1/\sqrt K$。
# - **Asymmetric PPO**：actor 只看历史、critic 额外读 hindsight；标准 clipped PPO + GAE，critic 回归 GAE return。在玩具任务上 hindsight 降低了优势方差，学习速度在种子间的波动之内。
# - **动态采样 / RFT / IcePop**：K = 8 去掉全对全错组；RFT 只留正确、无失败调用、无重复查询的轨迹；训推概率比越界的 token 不学。
# - **三层 reward**：成功 ≫ 进度，行为惩罚兜底；F2 让「找对文件」在失败时也有分。
# - **MOPD**：冷启动 → 学生自己采样、老师逐 token 打分（多教师按领域路由）；top-k 加权与动态截断挡住不可靠的老师信号，长度分层组 batch；门控的收益要用消融去测。
