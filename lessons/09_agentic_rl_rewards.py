# %% [markdown] slideshow={"slide_type": "slide"}
# # 第09课 智能体 RL：优势、比率、critic、规则 reward 与在线蒸馏 (Agentic RL and rewards)
#
# 第08课让训练数据和 reward 的来源变得可信；这一课看 reward 怎样变成**梯度**。KAT-Coder 三份报告里的五个机制，各写成一段可运行、可检验的小代码：
# GRPO 的难度/熵加权、turn-level 重要性比率与 MCLA、带 hindsight critic 的非对称 PPO、三层规则 reward、带 top-k 门控的在线蒸馏 (MOPD)。

# %% [markdown] slideshow={"slide_type": "subslide"}
# **学习目标 (Learning goals)**
#
# 1. **GRPO**：组内归一化的优势 (group-normalized advantage)；按任务难度 $D_i = 1 - \text{mean success}$ 放大难组、组内按熵放大探索样本；全零优势的组保持为零。
# 2. **Turn-level ratio + MCLA**（V2）：每一轮 (turn) 一个重要性比率并各自裁剪；平均 $K$ 次 prefill 的 log-prob 压低噪声。
# 3. **Asymmetric PPO + hindsight critic**（V2.5）：actor 只看历史，critic 还看环境知道的事实；用 GAE 在一个「先定位文件、再编辑」的小任务上做实验。
# 4. **三层规则 reward**（V2.5）：任务成功 > 行为惩罚 > 失败轨迹的进度分（F2 文件定位、部分测试通过）。
# 5. **On-policy distillation**（V2.5 MOPD）：学生采样、老师打分、逐 token reverse KL，按 top-k 重合度加权并在连续低重合后截断梯度。
#
# 参考：*KAT-Coder Technical Report*（V1，arXiv 2510.18779）；*KAT-Coder-V2 Technical Report*（V2）；*KAT-Coder-V2.5 Technical Report*（arXiv 2607.05471）。
# 本课的玩具设定 (toy settings) 是为教学写的，不是报告里的原始超参数。

# %% slideshow={"slide_type": "skip"} tags=["parameters"]
PROFILE = "ci"   # "ci" (CPU, offline) or "full" (GPU + internet)
SEED = 0

# %% slideshow={"slide_type": "skip"}
import matplotlib.pyplot as plt
import numpy as np
import torch

from course_lib import check_function, get_profile, record
from course_lib.agentic import load_lesson_model
from course_lib.agentic.grpo import (difficulty_weights, entropy_weights, group_advantages, weighted_advantages)
from course_lib.agentic.turns import (ratio_noise_by_k, sequence_ratios, token_logprobs, token_ratios,
                                      turn_level_loss, turn_ratios)
from course_lib.agentic.critic import CRITICS, ToyTask, advantage_quality, gae, train_actor
from course_lib.agentic.rewards import RewardConfig, ToolCall, Trajectory, f_beta, rule_reward
from course_lib.agentic.distill import gate_weights, on_policy_distill, topk_overlap, weaken

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
# KAT-Coder V1 在此之上做两种重加权（这里是课程的简化版）：
#
# - **任务难度** $D = 1 - \text{组内平均成功率}$：比 batch 平均更难的组乘以 $D_i / \bar D > 1$，简单组 $< 1$；
# - **组内熵**：平均 token 熵更高（更「探索」）的样本乘以 $H_j / \bar H$（裁剪到 $[0.5, 2]$）。
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


my_group_advantages = check_function(my_group_advantages, group_advantages, name="GRPO advantages", cases=[
    ([1, 0, 0, 1],), ([1, 0],), ([0.2, 0.5, 0.9, 0.1, 0.0],), ([1, 1, 1, 1],),
])

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
record("grpo_hard_over_easy_weight", float(difficulty_weights(groups)[1] / difficulty_weights(groups)[0]))

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

# %% slideshow={"slide_type": "subslide"}
# 3 turns of 6 tokens; only turn 2 drifted (its tokens became much more likely under the new policy)
logp_old = torch.log(torch.full((1, 18), 0.4))
logp_new = logp_old.clone(); logp_new[0, 12:] = torch.log(torch.tensor(0.8))
logp_new[0, :12] += 0.03 * torch.randn(12, generator=torch.Generator().manual_seed(SEED))
turns = torch.tensor([[0] * 6 + [1] * 6 + [2] * 6]); mask = torch.ones(1, 18)
r_tok, r_turn, r_seq = token_ratios(logp_new, logp_old), turn_ratios(logp_new, logp_old, turns, mask), sequence_ratios(logp_new, logp_old, mask)
lp = logp_new.clone().requires_grad_(True)
(grad,) = torch.autograd.grad(turn_level_loss(lp, logp_old, torch.ones(1, 18), turns, mask, clip_eps=0.2), lp)
fig, ax = plt.subplots(figsize=(9, 3))
ax.plot(r_tok[0], "o", label="token ratio", alpha=0.5); ax.step(range(18), r_turn[0], where="mid", label="turn ratio")
ax.plot(r_seq[0], "--", label="trajectory ratio"); ax.axhspan(0.8, 1.2, color="gray", alpha=0.15, label="clip range")
for t in range(18):
    if grad[0, t] == 0: ax.text(t, 0.72, "x", ha="center", color="red")
ax.set_xlabel("token (x = clipped: no gradient)"); ax.set_ylabel("ratio"); ax.legend(fontsize=7, loc="upper left")
plt.tight_layout(); plt.show()
print(f"trajectory ratio {r_seq[0, 0]:.3f} > 1.2: one ratio per trajectory would clip all 18 tokens; "
      f"turn-level clips {(grad[0] == 0).sum().item()} tokens (turn 2 only)")
record("turn_clipped_tokens", int((grad[0] == 0).sum().item()))

# %% [markdown] slideshow={"slide_type": "subslide"}
# ### MCLA：平均 $K$ 次 prefill 的 log-prob
#
# 大规模 MoE 模型里，训练端重算的 log-prob 带噪声（路由、kernel 非确定性），即使策略没变比率也不等于 1。
# MCLA 把同一批 token 做 $K$ 次 prefill，取 log-prob 的平均（报告用 $K=8$），噪声方差约降为 $1/K$。
# 这里用**打开 dropout 的模型**模拟路由噪声：比较两个独立估计的 log-ratio（理想值 0）的标准差。

# %% slideshow={"slide_type": "-"}
for module in model.modules():                   # dropout in attention = our stand-in for routing noise
    if hasattr(module, "attention_dropout"):
        module.attention_dropout = 0.1
model.train()
ids = torch.randint(0, VOCAB, (4, 32), generator=torch.Generator().manual_seed(SEED))
noise = ratio_noise_by_k(lambda: token_logprobs(model, ids), ks=tuple(P.mcla_ks), trials=P.mcla_trials)
model.eval()
ks = list(noise)
fig, ax = plt.subplots(figsize=(6, 3.2))
ax.loglog(ks, [noise[k] for k in ks], "o-", label="measured std of log-ratio")
ax.loglog(ks, [noise[ks[0]] / np.sqrt(k / ks[0]) for k in ks], "--", label=r"$\propto 1/\sqrt{K}$")
ax.set_xlabel("K prefills averaged"); ax.set_ylabel("noise"); ax.legend(); plt.tight_layout(); plt.show()
for k in ks:
    print(f"K={k}: std of log-ratio {noise[k]:.4f}")
record("mcla_noise", {str(k): v for k, v in noise.items()})

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 3. 非对称 PPO 与 hindsight critic（KAT-Coder-V2.5）
#
# PPO 的 critic 只在训练时使用，所以它可以**多看一点**：actor 只看历史，critic 还看环境知道但 agent 不知道的事实（gold patch 在哪个文件、测试在正确修复后能否通过……）。
# 只要这些事实**不依赖 agent 之后的动作**，把它们放进 baseline 不改变策略梯度的期望（无偏），却能去掉环境带来的噪声，并把优势放到真正起作用的那一步。
#
# GAE：$\delta_t = r_t + \gamma V(s_{t+1}) - V(s_t)$，$A_t = \delta_t + \gamma\lambda A_{t+1}$。
#
# **玩具任务**：第 0 步「定位文件」（跟随 issue 的提示——提示 60% 正确——或随便挑一个），接着 3 步编辑（好 / 马虎）；文件对、编辑都好、且测试在正确修复后能通过，reward 才是 1。
# 三个 critic：`history`（只看历史）、`hindsight`（+ 文件是否正确、测试能否通过）、`outcome`（+ 最终结果本身——反面教材）。

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
axes[0].set_ylabel("std of advantage"); axes[0].set_title("variance of advantages"); axes[0].legend(fontsize=8)
axes[0].text(task.steps - 1.5, 0.02, "outcome critic: 0 everywhere", fontsize=8, color="tab:green")
labels = ["A(locate) | right file", "A(locate) | wrong file", "A(edits) | wrong file"]
for i, kind in enumerate(CRITICS[:2]):
    vals = [q[kind]["a0_right_file"], q[kind]["a0_wrong_file"], q[kind]["edit_adv_wrong_file"]]
    axes[1].bar(np.arange(3) + (i - 0.5) * 0.4, vals, 0.4, label=kind)
axes[1].set_xticks(range(3)); axes[1].set_xticklabels(labels, fontsize=8); axes[1].axhline(0, c="k", lw=0.5)
axes[1].set_title("where the credit goes"); axes[1].legend(fontsize=8)
plt.tight_layout(); plt.show()
record("critic_adv_std", {k: q[k]["adv_std"] for k in CRITICS})
record("critic_edit_blame_wrong_file", {k: q[k]["edit_adv_wrong_file"] for k in CRITICS})

# %% [markdown] slideshow={"slide_type": "subslide"}
# 读图：
#
# - **方差**：hindsight critic 在每一步的优势标准差都更小（它知道文件对不对、测试能否通过，这部分随机性不再进入优势）；
# - **位置**：文件选错时，history critic 把负优势**分摊到之后的编辑步骤**（编辑其实没错）；hindsight critic 把它全部放在「定位」这一步，编辑步骤的优势 ≈ 0；
# - **outcome critic**：把结果本身告诉 critic，$V = R$，优势处处为 0——没有学习信号。hindsight 只能是「与 agent 未来动作无关」的信息。
#
# 两者的策略梯度期望相同（无偏）。下面用两种 critic 真的训练 actor（每种若干个随机种子）：

# %% slideshow={"slide_type": "-"}
curves = {kind: np.array([train_actor(task, kind, iterations=P.actor_iterations, seed=SEED + s)
                          for s in range(P.actor_seeds)]) for kind in CRITICS}
fig, ax = plt.subplots(figsize=(7, 3.4))
for kind, c in curves.items():
    m = c.mean(0); smooth = np.convolve(m, np.ones(5) / 5, mode="valid")
    ax.plot(smooth, label=f"{kind} critic")
ax.set_xlabel("iteration (batch of 32 episodes)"); ax.set_ylabel("success rate (5-iter mean)"); ax.legend()
plt.tight_layout(); plt.show()
final = {k: float(c[:, -10:].mean()) for k, c in curves.items()}
print("final success rate:", {k: round(v, 3) for k, v in final.items()})
record("critic_final_success", final)


# %% [markdown] slideshow={"slide_type": "-"}
# 在这个小任务上，history 与 hindsight critic 的学习速度相近（这里的梯度噪声主要来自 actor 自己的动作）；两者都远好于泄露结果的 outcome critic。
# hindsight 的收益在长轨迹、稀疏 reward 和环境噪声大的场景里更明显——这正是 SWE 类任务的样子。

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 4. 三层规则 reward（KAT-Coder-V2.5）
#
# 1. **任务成功**（权重最高）：所有 Fail-to-Pass 测试通过，且没有 Pass-to-Pass 测试被破坏；
# 2. **行为惩罚**：重复文本、格式错误的工具参数、重复的相同调用；
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


my_f_beta = check_function(my_f_beta, f_beta, name="F2 localisation", cases=[
    (["src/a.py"], ["src/a.py"]), (["src/a.py", "src/b.py", "src/c.py"], ["src/a.py"]),
    (["src/a.py"], ["src/a.py", "src/b.py", "src/c.py"]), ([], ["src/a.py"]), ([], []),
    (["x.py", "y.py"], ["y.py", "z.py"], 1.0),
])

# %% slideshow={"slide_type": "subslide"}
F2P, P2P, GOLD = ["test_new_1", "test_new_2"], ["test_old_1", "test_old_2"], ["src/calc.py"]
SCHEMAS = {"read_file": ["path"], "edit_file": ["path", "patch"]}
ok = {"test_new_1": True, "test_new_2": True, "test_old_1": True, "test_old_2": True}
read = ToolCall("read_file", '{"path": "src/calc.py"}')
scenarios = {
    "success": Trajectory("fixed it", [read], ["src/calc.py"], ok),
    "success, loopy": Trajectory("let me retry the edit " * 15, [read, read, read, ToolCall("edit_file", "{oops")],
                                 ["src/calc.py"], ok),
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
record("rule_rewards", {n: rewards[n]["reward"] for n in names})

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 5. On-policy distillation 与 top-k 门控（KAT-Coder-V2.5 MOPD）
#
# **离线蒸馏**让学生模仿老师写出的文本；**在线蒸馏 (on-policy distillation)** 让学生自己采样，老师给学生自己的前缀逐 token 打分：
# $$\mathcal{L} = \sum_t w_t \,\mathrm{KL}\big(\pi_s(\cdot\mid x_{<t}) \,\|\, \pi_t(\cdot\mid x_{<t})\big)$$
# reverse KL 是 mode-seeking 的：把学生从老师认为不可能的 token 上推开。V2.5 把多个专家（SWE、Agent-Claw、WebCoding）合并成一个学生（Multi-Teacher），并加两道保险：
#
# - $w_t$ = 学生与老师 **top-k token 的重合比例**：两者完全不一致的位置，老师的信号对这个学生不可靠；
# - 连续 `run` 个低重合 token 之后，学生已经漂到老师帮不上的地方：**截断**之后的梯度。
#
# 这里老师是本课的模型，学生是它加了噪声的「弱化副本」（`weaken`）。

# %% slideshow={"slide_type": "subslide"}
ov = torch.tensor([[0.9, 0.8, 0.1, 0.2, 0.7, 0.1, 0.0, 0.1, 0.1, 0.9, 1.0, 0.8]])
w = gate_weights(ov, threshold=0.25, run=4)
fig, ax = plt.subplots(figsize=(8, 2.6))
ax.bar(range(12), ov[0], color="lightgray", label="top-k overlap")
ax.bar(range(12), w[0], color="tab:green", alpha=0.8, label="weight after gating")
ax.axhline(0.25, ls="--", c="gray"); ax.set_xlabel("generated token"); ax.legend(fontsize=8)
ax.set_title("after 4 low-overlap tokens in a row, the rest of the sequence gets no gradient", fontsize=9)
plt.tight_layout(); plt.show()

# %% slideshow={"slide_type": "-"}
teacher = model.eval()
trained_teacher = getattr(model, "lesson_model_kind", "") == "tiny"
noise = P.distill_noise if trained_teacher else P.distill_fallback_noise
lr = P.distill_lr if trained_teacher else P.distill_fallback_lr
student = weaken(teacher, noise=noise, seed=SEED + 1)
print(f"teacher: {model_note}\nstudent: the teacher + Gaussian noise ({noise} x each weight's std); lr {lr}")
prompts = torch.randint(0, VOCAB, (8, 4), generator=torch.Generator().manual_seed(SEED))
history = on_policy_distill(student, teacher, prompts, steps=P.distill_steps, max_new_tokens=P.distill_new_tokens,
                            lr=lr, k=P.distill_topk, seed=SEED)
fig, ax1 = plt.subplots(figsize=(7, 3.2))
ax1.plot([h["kl"] for h in history], "o-", label="reverse KL (student || teacher)")
ax1.set_xlabel("distillation step"); ax1.set_ylabel("KL per token")
ax2 = ax1.twinx(); ax2.plot([h["overlap"] for h in history], "s--", c="tab:orange", label="top-k overlap")
ax2.set_ylabel("overlap"); fig.legend(loc="upper right", fontsize=8); plt.tight_layout(); plt.show()
kl_first = np.mean([h["kl"] for h in history[:3]]); kl_last = np.mean([h["kl"] for h in history[-3:]])
print(f"KL: first 3 steps {kl_first:.3f} -> last 3 steps {kl_last:.3f}; "
      f"overlap {history[0]['overlap']:.2f} -> {history[-1]['overlap']:.2f}")
record("mopd_kl_first", float(kl_first)); record("mopd_kl_last", float(kl_last))

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 小结 (Recap)
#
# - **GRPO 加权**：难组放大、探索样本放大，但只乘在优势上——全零组永远为零。
# - **Turn-level ratio**：只裁剪漂移的那一轮；**MCLA**：平均 $K$ 次 prefill，log-ratio 噪声 $\propto 1/\sqrt K$。
# - **Hindsight critic**：与未来动作无关的特权信息降低优势方差、把功劳放对位置；泄露结果会让优势消失。
# - **三层 reward**：成功 ≫ 进度，行为惩罚兜底；F2 让「找对文件」在失败时也有分。
# - **MOPD**：学生自己采样、老师逐 token 打分，reverse KL 下降；top-k 门控挡住不可靠的老师信号。
