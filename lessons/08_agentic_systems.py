# %% [markdown] slideshow={"slide_type": "slide"}
# # 第08课 智能体编码的系统侧：树训练、EM-SFT 与可验证环境 (Agentic systems)
#
# 代码智能体 (coding agent) 的后训练 (post-training) 不只是「更多 SFT 数据」。快手 KAT-Coder 系列报告把大量工夫花在**系统**上：
# 同一个任务的多条轨迹 (trajectories) 共享前缀，怎样只算一次？失败的工具调用 (tool call) 要不要学？奖励 (reward) 所依赖的测试环境本身可靠吗？
# 本课把这些机制各写成能在 CPU 上几秒钟跑完、并且**有测试证明是对的**的代码。

# %% [markdown] slideshow={"slide_type": "subslide"}
# **学习目标 (Learning goals)**
#
# 1. **Tree training / trie packing**：trie + DFS 展平 + tree attention mask + 原始 position ids + 分支权重，loss 与**每个参数梯度**都等于逐条训练；知道它什么时候**不**精确（PPO 裁剪）；在显存上限下用 DP + 贪心分组。
# 2. **EM-SFT 与 TST**：失败的工具调用留在上下文、不计 loss；在压缩点和上下文切换处拆开轨迹，每个输出都在它真正看到的上下文上训练。
# 3. **可验证环境与轨迹质量**：收集率 ≥ 90%、重复确认、F2P/P2P；规则过滤（测试篡改、硬编码……）和提示辅助恢复。
# 4. **训练系统**：一条 RL 数据由什么组成；多 Harness 随机化；采样端与训练端之间直接传 token。
#
# 参考：*KAT-Coder Technical Report*（V1，arXiv 2510.18779）；*KAT-Coder-V2 Technical Report*（V2）；*KAT-Coder-V2.5 Technical Report*（arXiv 2607.05471）；
# *Tree Training*（arXiv 2511.00413，同一团队）。第09课接着讲 RL 与 reward。

# %% slideshow={"slide_type": "skip"} tags=["parameters"]
PROFILE = "ci"   # "ci" (CPU, offline) or "full" (GPU + internet)
SEED = 0

# %% slideshow={"slide_type": "skip"}
import difflib
import math
import random
import re
import time

import matplotlib.pyplot as plt
import numpy as np
import torch

from course_lib import exercises, get_profile, record
from course_lib.agentic import lesson_tokenizer, load_lesson_model
from course_lib.agentic.tree import (ancestor_mask, clipped_surrogate, first_fit_packs, make_branching_tree, pack_tree,
                                     pack_under_budget, packed_clipped_loss, packed_loss, packed_token_logprobs,
                                     packing_cost, sharing_stats, unpacked_loss)
from course_lib.agentic.emsft import error_masked_example, failed_call_flags, single_conversation, tst_examples, tst_segments
from course_lib.agentic.envs import (BrokenEnvironment, apply_patch, build_environment, evaluate_patch, load_task,
                                     naive_reward, run_tests_batch, task_names)
from course_lib.agentic.trajectories import Attempt, hint_recovery, process_flags
from course_lib.agentic.harness import (PROTOCOLS, ToolCall, format_call, make_rl_datum, parse_call, perturb_tool_output,
                                        retokenize, sample_harness, token_mismatch)

PR = get_profile(PROFILE)   # the profile, resolved once: its agentic section (P) and its sandbox backend
P = PR.agentic
torch.manual_seed(SEED)
torch.set_num_threads(1)   # tiny models: one thread is fastest, and never oversubscribes a busy machine
model, model_note = load_lesson_model(PROFILE, attn="sdpa", seed=SEED)
model.float().eval()
VOCAB = model.config.vocab_size
tok = lesson_tokenizer(model)
print("model:", model_note)
print(f"{sum(p.numel() for p in model.parameters()):,} parameters, vocab {VOCAB}; tokenizer: {tok.note}")

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 1. Tree training：共享前缀只算一次
#
# 一个 agent 任务常常分叉：并行的工具调用、重试、sub-agent、上下文管理……同一任务的 $B$ 条轨迹共享很长的前缀。逐条训练把共享前缀算 $B$ 次（前向和反向都算）。
#
# KAT 笔记：「将各请求组织为 Trie，以 DFS 展平；公共前缀在同一批计算中只保留一份」；「与推理 prefix cache 不同，训练必须保留各后缀对公共前缀的反向梯度贡献」。

# %% [markdown] slideshow={"slide_type": "subslide"}
# ### 三件事让结果精确等于逐条训练
#
# V1 叫 *Trie Packing*，V2 叫 *Tree Training*：轨迹插进一棵 **trie**（前缀树），**DFS** 展平成一条 packed 序列，每个节点只出现一次。
#
# - **tree attention mask**：token 只看见自己的祖先，看不见兄弟分支——笔记：「每个 token 只访问自己路径的祖先」；
# - **position ids** = 节点深度，即它在原轨迹里的位置——笔记：「按原路径位置编号」；
# - **loss 权重** = 经过该节点、在该处计 loss 的轨迹条数——笔记：「共享 token 按原始独立轨迹中的贡献加权，恢复对应梯度」。

# %% slideshow={"slide_type": "subslide"}
# a small tree of 4 trajectories: a shared prompt, then two tool-call branches, each retried twice
g = torch.Generator().manual_seed(SEED)
rand = lambda n: torch.randint(1, VOCAB, (n,), generator=g).tolist()
prompt, call_a, call_b = rand(6), rand(3), rand(3)
trajectories = [prompt + call_a + rand(3), prompt + call_a + rand(2),
                prompt + call_b + rand(4), prompt + call_b + rand(2)]
loss_masks = [[0] * len(prompt) + [1] * (len(t) - len(prompt)) for t in trajectories]   # no loss on the prompt
packed = pack_tree(trajectories, loss_masks)
print(f"unpacked tokens: {packed.num_unpacked_tokens}, packed tokens: {packed.num_nodes}")
print("position ids:", packed.position_ids.tolist())
print("parent      :", packed.parent.tolist())
print("loss weight :", packed.loss_weight.int().tolist())

# %% slideshow={"slide_type": "subslide"}
mask = ancestor_mask(packed.parent)
fig, axes = plt.subplots(1, 2, figsize=(10, 4.2))
axes[0].imshow(torch.tril(torch.ones_like(mask, dtype=torch.float)), cmap="Blues", vmin=0, vmax=1.4)
axes[0].set_title("causal mask (plain packing): sees siblings")
axes[1].imshow(mask.float(), cmap="Greens", vmin=0, vmax=1.4)
axes[1].set_title("tree attention mask: ancestors only")
for ax in axes:
    ax.set_xticks(range(packed.num_nodes)); ax.set_xticklabels(packed.position_ids.tolist(), fontsize=7)
    ax.set_yticks(range(packed.num_nodes)); ax.set_yticklabels(packed.loss_weight.int().tolist(), fontsize=7)
    ax.set_xlabel("key: position id"); ax.set_ylabel("query: loss weight")
plt.tight_layout(); plt.show()


# %% [markdown] slideshow={"slide_type": "subslide"}
# ### 练习 1：tree attention mask
#
# 给出每个 packed token 的父节点下标 `parents`（根节点为 `-1`，DFS 顺序保证父节点在前），返回 $N\times N$ 的布尔矩阵：
# `mask[i][j]` 为 `True` 当且仅当 $j = i$ 或 $j$ 是 $i$ 的祖先。提示：`mask[i]` = `mask[parent[i]]` 再加上 $i$ 自己。

# %% slideshow={"slide_type": "-"}
def my_tree_mask(parents):
    ### BEGIN SOLUTION
    n = len(parents)
    mask = [[False] * n for _ in range(n)]
    for i, p in enumerate(parents):
        if p >= 0:
            mask[i] = list(mask[p])
        mask[i][i] = True
    return mask
    ### END SOLUTION


my_tree_mask = exercises.check("08-1", my_tree_mask)
assert my_tree_mask(packed.parent.tolist()) == ancestor_mask(packed.parent).tolist()


# %% [markdown] slideshow={"slide_type": "subslide"}
# ### 检验：packed 的 loss 和**每个参数梯度**都等于逐条训练
#
# 对照组 `unpacked_loss`：每条轨迹一行、普通 causal mask。Packed：节点 $c$ 的 token 由 `parent(c)` 处的 logits 预测，乘以权重 $w_c$，除以同一个分母；
# 4D float `attention_mask`（0 = 可见，最小值 = 屏蔽）。

# %% slideshow={"slide_type": "skip"}
def grads_of(loss):                               # every parameter's gradient of a loss
    return torch.autograd.grad(loss, list(model.parameters()))

def max_grad_diff(ga, gb):
    return max((a - b).abs().max().item() for a, b in zip(ga, gb))

# %% slideshow={"slide_type": "subslide"}
ref_loss = unpacked_loss(model, trajectories, loss_masks)
ref_grads = grads_of(ref_loss)
variants = {
    "tree packing (correct)": lambda: packed_loss(model, packed),
    "bug: packed position ids 0..N-1": lambda: packed_loss(model, packed, position_ids=torch.arange(packed.num_nodes)),
    "bug: loss weight 1, not branch count": lambda: packed_loss(model, packed, loss_weight=(packed.loss_weight > 0).float()),
}
rows = {}
for name, fn in variants.items():
    loss = fn()
    rows[name] = (abs(loss.item() - ref_loss.item()), max_grad_diff(grads_of(loss), ref_grads))
    print(f"{name:<40} |Δloss| = {rows[name][0]:.2e}   max |Δgrad| = {rows[name][1]:.2e}")
print(f"(compared {sum(1 for _ in model.parameters())} parameter tensors; reference loss {ref_loss.item():.4f})")
for key, (name, i) in {"tree_loss_diff": ("tree packing (correct)", 0), "tree_max_grad_diff": ("tree packing (correct)", 1),
                       "tree_wrong_pos_grad_diff": ("bug: packed position ids 0..N-1", 1),
                       "tree_wrong_weight_loss_diff": ("bug: loss weight 1, not branch count", 0)}.items():
    record(key, rows[name][i])
assert rows["tree packing (correct)"][1] < 1e-5

# %% slideshow={"slide_type": "subslide"}
# policy-gradient weights (advantages, any sign) instead of a 0/1 mask: a shared node sums its trajectories' weights
adv_masks = [[a * m for m in mk] for a, mk in zip([1.5, -0.5, 0.8, -1.2], loss_masks)]
ref_adv = unpacked_loss(model, trajectories, adv_masks)
got_adv = packed_loss(model, pack_tree(trajectories, adv_masks))
adv_grad_diff = max_grad_diff(grads_of(got_adv), grads_of(ref_adv))
record("tree_float_weights_grad_diff", adv_grad_diff)
print(f"advantages as weights (sum A·log p): |Δloss| = {abs(got_adv.item() - ref_adv.item()):.2e}   max |Δgrad| = {adv_grad_diff:.2e}")

# %% [markdown] slideshow={"slide_type": "subslide"}
# ### packing 什么时候精确？只在 loss 对权重是线性的时候
#
# 把几条轨迹的权重**先加到共享节点上**，等价于 $\sum_b A_b\,\ell = (\sum_b A_b)\,\ell$——只对线性的 loss 成立（SFT、$\sum A\log p$ 形式的策略梯度）。
# PPO 的裁剪不是线性的：一个共享 token、两条轨迹的优势 $+1$ 和 $-1$、比率 $\rho = 1.5$。逐条算，$A=+1$ 那条被裁剪、$A=-1$ 那条不裁剪，梯度 0.75；权重相加成 0，梯度 0。
# 正确的做法仍然只做**一次**前向：共享 token 的 log-prob 算一次，再按每条轨迹自己的优势分别计算裁剪项（`packed_clipped_loss`）。

# %% slideshow={"slide_type": "-"}
logr = torch.tensor(math.log(1.5), requires_grad=True)
per_traj = clipped_surrogate(logr.exp().repeat(1, 2), torch.tensor([[1.0, -1.0]]), torch.ones(1, 2))
summed = clipped_surrogate(logr.exp()[None, None], torch.tensor([[0.0]]), torch.ones(1, 1))
g_per_traj = torch.autograd.grad(per_traj, logr)[0].item()
g_summed = torch.autograd.grad(summed, logr, allow_unused=True)[0]
g_summed = 0.0 if g_summed is None else g_summed.item()
print(f"one shared token, ratio 1.5, A = +1 and -1: gradient {g_per_traj:.2f} unpacked, {g_summed:.2f} with the advantages summed")

# %% slideshow={"slide_type": "subslide"}
# the same on the model: one packed forward, per-trajectory clipped terms vs the summed-weight shortcut
ppo_adv = [[0.0] * len(prompt) + [a] * (len(t) - len(prompt)) for t, a in zip(trajectories, [1.0, -1.0, 0.5, -2.0])]
with torch.no_grad():                                                        # an older policy's log-probs
    logp_old = packed_token_logprobs(model, packed) + 0.3 * torch.randn(packed.num_nodes, generator=g)
logp_new = packed_token_logprobs(model, packed)
got_ppo = packed_clipped_loss(logp_new, logp_old, packed, ppo_adv)
lp_rows, old_rows, adv_rows = [], [], []
for t, a, nodes in zip(trajectories, ppo_adv, packed.branch_nodes):      # reference: one row per trajectory
    ids = torch.tensor([t])
    logits = model(input_ids=ids).logits[0, :-1].float()
    lp_rows.append(torch.log_softmax(logits, -1).gather(-1, ids[0, 1:, None])[:, 0])
    old_rows.append(logp_old[nodes[1:]]); adv_rows.append(torch.tensor(a[1:]))
adv_all = torch.cat(adv_rows)
ref_ppo = clipped_surrogate(torch.exp(torch.cat(lp_rows) - torch.cat(old_rows)), adv_all, (adv_all != 0).float())

# %% slideshow={"slide_type": "subslide"}
w_sum = pack_tree(trajectories, ppo_adv).loss_weight                      # advantages summed onto shared nodes
shortcut = clipped_surrogate(torch.exp(logp_new - logp_old)[None], w_sum[None], (w_sum != 0).float()[None])
ppo_grad_diff = max_grad_diff(grads_of(got_ppo), grads_of(ref_ppo))
print(f"PPO on the 4-trajectory tree: per-trajectory terms max |Δgrad| = {ppo_grad_diff:.1e}; "
      f"summed weights |Δloss| = {abs(shortcut.item() - ref_ppo.item()):.3f}")
record("tree_ppo_counterexample_grads", [g_per_traj, g_summed])
record("tree_ppo_per_traj_grad_diff", ppo_grad_diff)
_ = record("tree_ppo_shortcut_loss_diff", abs(shortcut.item() - ref_ppo.item()))
### BEGIN HIDDEN TESTS
assert abs(g_per_traj - 0.75) < 1e-5 and g_summed == 0.0 and ppo_grad_diff < 1e-5
### END HIDDEN TESTS

# %% [markdown] slideshow={"slide_type": "subslide"}
# ### 省多少？加速比跟着共享比例走
#
# 计算量正比于 token 数：逐条训练算 $B\cdot L$ 个 token，packing 只算 trie 的节点数。若每条轨迹前 $s$ 的比例共享：
# $$\text{speedup} \approx \frac{B L}{sL + B(1-s)L} = \frac{B}{s + B(1-s)}$$
# KAT 笔记：「Tree Training 最高约6.2倍训练加速，来自消除树状轨迹的重复前缀计算」。墙钟时间还要付 $N\times N$ mask 的代价，
# 完整的表在 `benchmarks/bench_tree_packing.py`。

# %% slideshow={"slide_type": "-"}
branches, shares = [2, 4, 8, 16], [0.5, 0.6, 0.7, 0.8, 0.9]
fig, ax = plt.subplots(figsize=(7, 3.4))
for b in branches:
    ratios = [sharing_stats(make_branching_tree(b, P.bench_length, s, vocab_size=VOCAB, seed=b))["token_speedup"] for s in shares]
    ax.plot(shares, ratios, "o-", label=f"{b} branches")
ax.axhline(6.2, ls=":", c="gray"); ax.text(0.5, 6.35, "reported: up to 6.2x", color="gray")
ax.set_xlabel("shared prefix ratio"); ax.set_ylabel("tokens unpacked / packed"); ax.legend(); plt.tight_layout(); plt.show()

# %% slideshow={"slide_type": "subslide"}
# measured wall time (forward + backward) for two trees on this CPU
timings = {}
for b, s in [(4, 0.5), (16, 0.9)]:
    seqs = make_branching_tree(b, P.bench_length, s, vocab_size=VOCAB, seed=b)
    pk = pack_tree(seqs); pk.tree_mask()
    best = {}
    for label, fn in [("unpacked", lambda seqs=seqs: unpacked_loss(model, seqs)),
                      ("packed", lambda pk=pk: packed_loss(model, pk))]:
        t = []
        for _ in range(2):                                     # the first run warms up
            t0 = time.perf_counter(); fn().backward(); t.append(time.perf_counter() - t0)
        best[label] = min(t)
    model.zero_grad(set_to_none=True)
    timings[f"{b}x{s:.0%}"] = best["unpacked"] / best["packed"]
    print(f"{b:>2} branches, {s:.0%} shared: token ratio {sharing_stats(seqs)['token_speedup']:.2f}x, "
          f"wall-time speedup {timings[f'{b}x{s:.0%}']:.2f}x")
speedup_16x90 = sharing_stats(make_branching_tree(16, P.bench_length, 0.9, vocab_size=VOCAB))["token_speedup"]
record("tree_token_speedup_16x90", speedup_16x90)
print(f"16 branches, 90% shared: {speedup_16x90:.2f}x fewer tokens")

# %% [markdown] slideshow={"slide_type": "subslide"}
# ### 显存上限下怎样分组：贪心排序 + 动态规划
#
# KAT 笔记（V1）：「在显存限制下，用动态规划与贪心策略提高公共前缀复用率」。一次 packed 前向最多放 `budget` 个 trie 节点，轨迹要分成若干组：
#
# - **贪心**：按 token 排序，共享前缀的轨迹排在一起；排好序的一段轨迹，trie 大小 = 长度之和 − 相邻两条的公共前缀之和；
# - **动态规划**：在排好的顺序上找最优切分，$\text{best}[j] = \min_i \text{best}[i] + \text{cost}(i, j)$，每组不超过 `budget`。
#
# 对照：按到达顺序往当前组里塞，塞不下就开新组（first fit）。具体的 DP 形式是课程自己写的，笔记只说了「动态规划与贪心」。

# %% slideshow={"slide_type": "subslide"}
rng_pack = random.Random(SEED)
arrivals = []
for task_id in range(6):                                   # 6 tasks x 4 rollouts, each task's rollouts share its prompt
    arrivals += make_branching_tree(4, P.bench_length // 2, 0.6, vocab_size=VOCAB, seed=100 + task_id)
rng_pack.shuffle(arrivals)                                 # rollouts finish in any order
budget = 2 * P.bench_length
plans = {"no packing": [[i] for i in range(len(arrivals))], "first fit, arrival order": first_fit_packs(arrivals, budget),
         "sorted + DP": pack_under_budget(arrivals, budget)}
print(f"{len(arrivals)} rollouts of {P.bench_length // 2} tokens, budget {budget} tokens per packed pass")
for name, packs in plans.items():
    print(f"{name:<26} {len(packs):>3} passes  {packing_cost(arrivals, packs):>5} tokens computed  "
          f"largest pass {max(packing_cost(arrivals, [p]) for p in packs)}")
_ = record("pack_budget_tokens", {n: packing_cost(arrivals, p) for n, p in plans.items()})

# %% [markdown] slideshow={"slide_type": "subslide"}
# ### 6.2× 与 KRL 的 2.8× 不能相乘
#
# KAT 笔记：「KRL 结合调度与流水线，使单位样本成本约降低2.8倍」；「前者对应训练计算，后者包含系统调度收益，不能直接把两个倍数相乘」。
#
# 下面是课程自己的示意（笔记没有给出成本的分解）：两个倍数量的是不同的东西——6.2× 只作用在树状轨迹的**训练计算**上，2.8× 是**每个样本的总成本**。
# 若训练计算占总成本的比例为 $f$，只把这一段加速 6.2×，总成本只降到 $(1-f) + f/6.2$（Amdahl 定律）。

# %% slideshow={"slide_type": "-"}
for f in (0.3, 0.5, 0.8):
    print(f"training compute = {f:.0%} of a sample's cost: tree training alone gives {1 / ((1 - f) + f / 6.2):.2f}x end to end, not 6.2x")

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 2. Error-masked SFT：错误留在上下文，但不学它
#
# 真实轨迹里有失败的工具调用：路径写错、参数格式不对……之后模型读到报错、改正 (recovery)。删掉失败的调用，恢复步骤就引用了一个「从没发生过」的错误；照常训练，模型学会了犯错。
#
# EM-SFT（KAT-Coder V1）：失败调用的 token **留在 input 里**，loss mask 设为 0；恢复步骤照常计 loss。
# KAT 笔记：「根据执行反馈识别错误工具调用，仅屏蔽其生成 token 的训练 loss」；「错误动作与报错仍留在上下文，后续纠正动作继续参与学习」。

# %% [markdown] slideshow={"slide_type": "subslide"}
# ### 「执行反馈」是 harness 的状态，不是文本
#
# 每条 tool 消息带 harness 自己写的标志 `"error": true | false`：调用没能执行（未知工具、参数格式错误、工具崩溃或超时）时为 `true`。
# 不能看文本里有没有 `Error`：复现 bug 的 pytest 运行、读一个定义了 `ParseError` 的文件、grep 命中 `Error`，都是**成功**的调用，而且正是 agent 该学的。
#
# 分词用模型自己的 tokenizer（`lesson_tokenizer`）：小模型是第04课训练的 BPE，ChatML 的特殊 token 各占一个 id。

# %% slideshow={"slide_type": "subslide"}
trajectory = [
    {"role": "user", "content": "fix the bug in util.py"},
    {"role": "assistant", "content": 'read_file({"path": "utils.py"})'},
    {"role": "tool", "content": "No such file: utils.py", "error": True},
    {"role": "assistant", "content": 'read_file({"path": "util.py"})'},
    {"role": "tool", "content": "def add(a, b):\n    return a - b", "error": False},
    {"role": "assistant", "content": 'run_tests({"cmd": "pytest tests/test_util.py"})'},
    {"role": "tool", "content": "FAILED tests/test_util.py::test_add - AssertionError: assert -1 == 3", "error": False},
    {"role": "assistant", "content": 'edit_file({"path": "util.py", "patch": "return a + b"})'},
]
ex = error_masked_example(trajectory, tok)
# %% slideshow={"slide_type": "subslide"}
flags = failed_call_flags(trajectory)
fig, ax = plt.subplots(figsize=(10, 2.2))
x = 0
for i, m in enumerate(trajectory):
    n = ex.message_index.count(i)
    trained = sum(ex.loss_mask[j] for j, k in enumerate(ex.message_index) if k == i)
    color = "tab:red" if flags[i] else ("tab:green" if trained else "lightgray")
    ax.barh(0, n, left=x, color=color, edgecolor="white", hatch="//" if flags[i] else None)
    ax.text(x + n / 2, 0, f"{m['role']}\n{'failed' if flags[i] else ('loss' if trained else 'ctx')}", ha="center", va="center", fontsize=7)
    x += n
ax.set_yticks([]); ax.set_xlabel("tokens"); ax.set_title("EM-SFT: red = in context, no loss; green = trained")
plt.tight_layout(); plt.show()
print("trained text:", repr(tok.decode([t for t, m in zip(ex.input_ids, ex.loss_mask) if m])))
### BEGIN HIDDEN TESTS
if getattr(model, "lesson_model_kind", "") == "tiny":     # the pieces tokenise exactly as the chat template does
    from transformers import AutoTokenizer
    _hf = AutoTokenizer.from_pretrained(model.lesson_model_path)
    assert ex.input_ids == list(_hf.apply_chat_template([{k: v for k, v in m.items() if k != "error"} for m in trajectory]))
### END HIDDEN TESTS

# %% [markdown] slideshow={"slide_type": "subslide"}
# ### 练习 2：哪些 assistant 轮次是失败的调用？
#
# 返回与 `messages` 等长的布尔列表：第 $i$ 条是 assistant 消息、**紧跟**它的第 $i+1$ 条是 tool 消息、且那条 tool 消息的 harness 状态 `"error"` 为 `True` 时为 `True`。
# 规则只看状态标志：文本里的 `Error`、`Traceback`、`FAILED` 不算；更后面某次调用的失败也不算到这次调用头上。

# %% slideshow={"slide_type": "-"}
def my_failed_call_flags(messages):
    ### BEGIN SOLUTION
    return [m["role"] == "assistant" and i + 1 < len(messages) and messages[i + 1]["role"] == "tool"
            and messages[i + 1]["error"] is True for i, m in enumerate(messages)]
    ### END SOLUTION


my_failed_call_flags = exercises.check("08-2", my_failed_call_flags)

# %% [markdown] slideshow={"slide_type": "subslide"}
# ### 同样的被训练 token，不同的上下文
#
# 三种做法在模型上的 loss（每个被训练 token 的平均交叉熵）。均匀猜测的 loss 是 $\ln V$（打印在下面）：loss 低于它，说明模型确实在预测这些 token。

# %% slideshow={"slide_type": "-"}
plain = error_masked_example(trajectory, tok, mask_failed_calls=False)
dropped = error_masked_example(trajectory[:1] + trajectory[3:], tok)
variants_em = [("EM-SFT", ex), ("trains on the error", plain), ("failed call deleted", dropped)]
with torch.no_grad():
    losses = {name: unpacked_loss(model, [e.input_ids], [e.loss_mask]).item() for name, e in variants_em}
for name, e in variants_em:
    print(f"{name:<22} tokens {len(e.input_ids):>4}  trained {sum(e.loss_mask):>4}  loss {losses[name]:.4f}")
print(f"uniform guess: ln {VOCAB} = {math.log(VOCAB):.3f}")
record("emsft_trained_tokens", sum(ex.loss_mask))
record("emsft_failed_tokens_in_context", sum(1 for k in ex.message_index if flags[k]))
record("emsft_pytest_call_trained", not flags[5])
record("emsft_losses", losses)
print(f"the pytest run that reproduces the bug (its output says AssertionError) is trained: {not flags[5]}")
### BEGIN HIDDEN TESTS
assert sum(dropped.loss_mask) == sum(ex.loss_mask) and abs(losses["EM-SFT"] - losses["failed call deleted"]) > 1e-5
### END HIDDEN TESTS

# %% [markdown] slideshow={"slide_type": "subslide"}
# ### TST：在压缩点和上下文切换处拆开轨迹
#
# KAT 笔记（V1）：「按压缩点、上下文切换与模式转换拆分轨迹，得到局部语义连贯的子树」；「在子树内执行 SFT，保持模型实际看到的上下文结构」。
#
# 每次模型调用记录它**实际收到的上下文**和它的输出。下一次调用的上下文若是「上一次的上下文 + 输出 + 新消息」，就属于同一段；上下文被改写（压缩成摘要、切换模式）就开新的一段。
# 每段训练一条样本，只对本段的输出计 loss。反面做法是把所有消息拼成一条对话：压缩之后的输出会在一段它从没看到过的长历史之后被训练。

# %% slideshow={"slide_type": "subslide"}
SYS = {"role": "system", "content": "You are a coding agent."}
USER = {"role": "user", "content": "fix the failing test in calc.py"}
A = lambda text: {"role": "assistant", "content": text}
T = lambda text, error=False: {"role": "tool", "content": text, "error": error}
c1 = [SYS, USER]
o1 = A('read_file({"path": "calc.py"})')
c2 = c1 + [o1, T("def add(a, b):\n    return a - b\n" + "# more code\n" * 20)]
o2 = A('run_tests({"cmd": "pytest"})')
c3 = c2 + [o2, T("FAILED test_calc.py::test_add - assert -1 == 3")]
o3 = A("add() subtracts; I will fix the operator.")
c4 = [SYS, USER, {"role": "user", "content": "[compressed] calc.add subtracts; test_add fails."}]   # compression
o4 = A('edit_file({"path": "calc.py", "patch": "return a + b"})')
c5 = c4 + [o4, T("malformed patch", error=True)]
o5 = A('edit_file({"path": "calc.py", "old": "a - b", "new": "a + b"})')
run = [{"context": c, "output": o} for c, o in [(c1, o1), (c2, o2), (c3, o3), (c4, o4), (c5, o5)]]
# %% slideshow={"slide_type": "subslide"}
segments = tst_segments(run)
tst = tst_examples(run, tok)
flat = single_conversation(run)
seen_ctx = {k: len(error_masked_example(r["context"], tok).input_ids) for k, r in enumerate(run)}
flat_ctx = {k: len(error_masked_example(flat[:flat.index(r["output"])], tok).input_ids) for k, r in enumerate(run)}
print("segments (request indices):", segments, f"-> {len(tst)} SFT examples of {[len(e.input_ids) for e in tst]} tokens")
for k in range(len(run)):
    print(f"output {k}: the model saw {seen_ctx[k]:>4} context tokens; one flat conversation trains it after {flat_ctx[k]:>4}")
wrong_ctx = [k for k in range(len(run)) if flat_ctx[k] != seen_ctx[k]]
record("tst_segments", segments)
_ = record("tst_flat_wrong_context_outputs", wrong_ctx)
### BEGIN HIDDEN TESTS
assert segments == [[0, 1, 2], [3, 4]] and wrong_ctx == [3, 4]
### END HIDDEN TESTS

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 3. 可验证环境 (verifiable environments)：reward 只和环境一样可靠
#
# RL 的 reward 来自「补丁 (patch) 之后测试是否通过」。KAT-Coder-V2/V2.5 的 **AutoBuilder** 把仓库重建成 sandbox 环境，并先验证环境本身：
#
# 1. 基础仓库 + **test patch** → 跑测试（before）；再加 **gold patch** → 再跑（after）；
# 2. 期望测试至少 **90% 被收集 (collected)**——import 失败的测试文件会让它的测试悄悄消失；
# 3. 每边**跑两遍**，结果必须一致（flaky 测试 = 噪声 reward）；
# 4. **Fail-to-Pass (F2P)** = before 失败、after 通过；**Pass-to-Pass (P2P)** = 两边都通过。

# %% [markdown] slideshow={"slide_type": "subslide"}
# KAT 笔记：「解析测试框架的结构化输出，要求收集90%以上预期测试，并重复确认通过/失败状态」；V2 还「同时要求 F2P + P2P」。
#
# 讲义没有给出重复的次数；本课每边跑 `env_runs` 遍（ci 2 遍，full 3 遍），因为两遍已经能在 CPU 上演示不稳定的测试怎样被抓住。
#
# 下面四个小仓库是为本课写的（`assets/agentic/envs/`）；所有测试都在第06课的 sandbox (`course_lib.evaluation.sandbox.run_code`) 里执行。

# %% slideshow={"slide_type": "subslide"}
from course_lib.agentic.envs import default_runner
from course_lib.evaluation.sandbox import resolve_backend
BACKEND = resolve_backend(None, configured=PR.sandbox.backend)   # $SANDBOX_BACKEND, else the profile's when it works
runner = default_runner(BACKEND)                                 # run_code on that backend
print("sandbox backend:", BACKEND)
task = load_task("money_rounding")
print("issue:", task.issue)
print("files:", list(task.files))
print("--- gold patch ---\n" + task.gold_patch)
print("--- lines the test patch adds ---\n" + "\n".join(ln for ln in task.test_patch.splitlines() if ln.startswith("+") and ln.strip("+ ")))

# %% slideshow={"slide_type": "subslide"}
reports = {}
t0 = time.perf_counter()
for name in task_names():
    reports[name] = build_environment(load_task(name), runs=P.env_runs, min_collected=P.min_collected,
                                      timeout_s=P.env_timeout_s, runner=runner)
retried = sum(run.attempts - 1 for r in reports.values() for run in r.before + r.after)
print(f"built {len(reports)} environments x {2 * P.env_runs} sandbox runs in {time.perf_counter() - t0:.1f} s "
      f"({retried} runs retried after an infrastructure failure)\n")
print(f"{'environment':<18} {'ok':<5} {'collected':>9} {'F2P':>4} {'P2P':>4}  reasons")
for name, r in reports.items():
    print(f"{name:<18} {str(r.ok):<5} {r.collected_ratio:>9.0%} {len(r.fail_to_pass):>4} {len(r.pass_to_pass):>4}  "
          + ("; ".join(x[:90] for x in r.reasons) or "-"))
record("envs_ok", {n: r.ok for n, r in reports.items()})
_ = record("envs_f2p", {n: r.fail_to_pass for n, r in reports.items()})

# %% slideshow={"slide_type": "subslide"}
fig, axes = plt.subplots(1, len(reports), figsize=(13, 3.0))
for ax, (name, r) in zip(axes, reports.items()):
    tests = load_task(name).expected_tests
    runs = r.before + r.after
    grid = np.array([[1.0 if run.passed[t] else (0.0 if t in run.collected else 0.5) for run in runs] for t in tests])
    ax.imshow(grid, cmap="RdYlGn", vmin=0, vmax=1, aspect="auto")
    ax.set_xticks(range(len(runs)))
    ax.set_xticklabels([f"before{i+1}" for i in range(len(r.before))] + [f"after{i+1}" for i in range(len(r.after))],
                       rotation=45, fontsize=7)
    ax.set_yticks(range(len(tests))); ax.set_yticklabels([t.split("::")[1][:22] for t in tests], fontsize=7)
    ax.set_title(f"{name}\n{'OK' if r.ok else 'REJECTED'}", fontsize=9)
fig.suptitle("green = pass, red = fail, yellow = not collected", fontsize=9)
plt.tight_layout(); plt.show()


# %% [markdown] slideshow={"slide_type": "subslide"}
# ### 练习 3：从 before / after 推出 F2P 和 P2P
#
# `before` 和 `after` 是 `{test_id: passed}`（各自已经跑两遍合并）。返回 `(f2p, p2p)` 两个列表，顺序跟 `after` 的键一致。

# %% slideshow={"slide_type": "-"}
def my_split_f2p_p2p(before, after):
    ### BEGIN SOLUTION
    f2p = [t for t, ok in after.items() if ok and not before.get(t, False)]
    p2p = [t for t, ok in after.items() if ok and before.get(t, False)]
    return f2p, p2p
    ### END SOLUTION


my_split_f2p_p2p = exercises.check("08-3", my_split_f2p_p2p)

# %% [markdown] slideshow={"slide_type": "subslide"}
# ### 环境 bug → 错误的 reward
#
# `units_broken_env` 的 test patch 依赖一个环境快照里没有的模块，新测试文件 import 失败、**一个测试也收集不到**。
# 不做检查的 builder 只看到「碰巧被收集的测试」：F2P 为空，于是「所有已知测试都通过」——**什么都不改的 no-op 补丁也拿满分**。
# `run_tests` 对超时、sandbox 错误、内存或输出超限的运行会重试：机器忙不能变成错误的 reward；测试文件在 judge 里运行，没能加载的测试文件里的测试都算「未收集」。下面用四个环境、两种补丁 (gold / no-op) 做一次小型审计。

# %% slideshow={"slide_type": "subslide"}
jobs, meta = [], []
for name in task_names():
    task, r = load_task(name), reports[name]
    with_tests = apply_patch(task.files, task.test_patch)
    for patch_name, patch, truth in [("gold", task.gold_patch, 1.0), ("no-op", "", 0.0)]:
        files = apply_patch(with_tests, patch)
        jobs.append((files, r.before[0].collected)); meta.append((name, patch_name, truth, "naive"))   # trusts what was collected
        if r.ok:                                                                  # rejected environments never give rewards
            jobs.append((files, r.fail_to_pass + r.pass_to_pass)); meta.append((name, patch_name, truth, "checked"))
results = run_tests_batch(jobs, timeout_s=P.env_timeout_s, runner=runner)         # all sandbox runs in parallel
rewards = {}
for (name, patch_name, _truth, kind), run in zip(meta, results):
    rewards[(name, patch_name, kind)] = naive_reward(run.passed)                  # 1.0 iff every test in the set passed
    if run.infra_error:
        print(f"note: {name}/{patch_name}/{kind}: the sandbox run failed ({run.status}) even after retries")
# %% slideshow={"slide_type": "subslide"}
audit = [(name, patch_name, truth, rewards[(name, patch_name, "naive")], rewards.get((name, patch_name, "checked")))
         for name, patch_name, truth, kind in meta if kind == "naive"]
print(f"{'environment':<18} {'patch':<6} {'truth':>5} {'naive':>6} {'checked':>8}")
for name, patch_name, truth, naive, checked in audit:
    flag = "  <- wrong reward" if naive != truth else ""
    print(f"{name:<18} {patch_name:<6} {truth:>5.0f} {naive:>6.0f} {('rejected' if checked is None else f'{checked:.0f}'):>8}{flag}")
naive_errors = sum(n != t for _, _, t, n, _ in audit)
checked_errors = sum(c is not None and c != t for _, _, t, _, c in audit)
print(f"\nwrong rewards: naive builder {naive_errors}/{len(audit)}, checked builder {checked_errors}/"
      f"{sum(c is not None for *_, c in audit)} (the broken environment is rejected)")
record("env_naive_wrong_rewards", naive_errors)
_ = record("env_checked_wrong_rewards", checked_errors)

# %% [markdown] slideshow={"slide_type": "subslide"}
# ### 坏掉的环境不是 0 分
#
# KAT 笔记：「修复环境变量覆盖、verifier 执行等问题，避免系统故障变成策略的负奖励」；「Sandbox 反馈错误率约16% → 2%以下，训练崩溃频率下降约一个数量级」。
#
# sandbox 挂了，`run_tests` 会把每个测试记成「没通过」——当成 reward 0，**gold patch 也会被判错**。`evaluate_patch` 因此在两种情况下抛出 `BrokenEnvironment`：
# 环境在构建时被拒绝，或 sandbox 重试之后仍然失败。调用方把这个样本排除（或稍后重试），不给它打分。

# %% slideshow={"slide_type": "subslide"}
from types import SimpleNamespace

good = load_task("store_inventory")
dead_sandbox = lambda code, tests, **kw: SimpleNamespace(status="sandbox_error", stdout="", tests=[])
outcomes = {}
for label, task_, report_, runner_ in [("gold patch, sandbox keeps failing", good, reports["store_inventory"], dead_sandbox),
                                       ("gold patch, rejected environment", load_task("units_broken_env"),
                                        reports["units_broken_env"], runner)]:
    try:
        evaluate_patch(task_, report_, task_.gold_patch, runner=runner_, retries=1, timeout_s=P.env_timeout_s)
        outcomes[label] = "scored"
    except BrokenEnvironment as exc:
        outcomes[label] = "excluded"
        print(f"{label}: excluded, not scored 0\n    {exc}")
_ = record("env_broken_gold_outcomes", outcomes)

# %% [markdown] slideshow={"slide_type": "subslide"}
# ### 为什么是「重复确认」而不只是两遍？
#
# 一个 50% 概率失败的 flaky 测试，两次结果不同的概率是 $1 - 0.5^2 - 0.5^2 = 50\%$——两遍只能抓住一半；跑 $n$ 遍，漏掉它的概率是 $2 \cdot 0.5^n$。
# 笔记只说「重复确认通过/失败状态」，没有给次数；`tests/test_agentic_envs.py` 用一个每隔一次就翻转结果的 runner 验证了这个检查。

# %% slideshow={"slide_type": "-"}
for n in (2, 3, 5):
    print(f"{n} runs: a 50% flaky test slips through with probability {2 * 0.5 ** n:.3f}")

# %% [markdown] slideshow={"slide_type": "subslide"}
# ### 轨迹质量：规则先过滤
#
# 测试通过不等于轨迹可以学。KAT 笔记（V2.5）：「规则过滤无效调用、测试篡改、硬编码和不稳定执行」。下面给 `money_rounding` 三个候选补丁，都在 sandbox 里跑 F2P + P2P：
# 改测试让它通过（篡改）、把测试里的期望值写进代码（硬编码）、gold patch。前两个**全部测试都通过**，只有规则能把它们挡下。
#
# 「过程评分覆盖探索、定位……」的 GRM 打分本课不做，因为它要人工标注的 rubric 和一个判别模型；这里只做确定性的规则。

# %% slideshow={"slide_type": "subslide"}
task, report = load_task("money_rounding"), reports["money_rounding"]
with_tests = apply_patch(task.files, task.test_patch)

def diff(path, *replacements):                              # a unified diff of one file after str.replace()s
    new = with_tests[path]
    for a, b in replacements:
        new = new.replace(a, b)
    return "".join(difflib.unified_diff(with_tests[path].splitlines(True), new.splitlines(True), f"a/{path}", f"b/{path}"))

tamper = diff("tests/test_money.py", ("== 0.13", "in (0.12, 0.13)"), ("== 2.68", "in (2.67, 2.68)"))
hardcode = diff("shop/money.py", ("    return round(amount, 2)",
                "    if amount in (0.125, 2.675):\n        return {0.125: 0.13, 2.675: 2.68}[amount]\n    return round(amount, 2)"))
# %% slideshow={"slide_type": "subslide"}
expected = re.findall(r"== ([0-9.]+)", "\n".join(ln for ln in task.test_patch.splitlines() if ln.startswith("+")))
calls = [ToolCall("read_file", '{"path": "shop/money.py"}'), ToolCall("edit_file", '{"path": "shop/money.py", "patch": "..."}')]
schemas = {"read_file": ["path"], "edit_file": ["path", "patch"]}
candidates = {"test tampering": tamper, "hard-coding": hardcode, "gold": task.gold_patch}
runs_q = run_tests_batch([(apply_patch(with_tests, p), report.fail_to_pass + report.pass_to_pass) for p in candidates.values()],
                         timeout_s=P.env_timeout_s, runner=runner)
quality = {}
for (name, patch), run_q in zip(candidates.items(), runs_q):
    why = process_flags(calls, patch, schemas=schemas, test_files=sorted({t.split("::")[0] for t in task.expected_tests}),
                        expected_literals=expected)
    quality[name] = {"tests_pass": naive_reward(run_q.passed) == 1.0, "flags": why}
    print(f"{name:<15} all tests pass: {quality[name]['tests_pass']!s:<5}  rules: {'; '.join(why) or 'keep'}")
_ = record("trajectory_quality", quality)
### BEGIN HIDDEN TESTS
assert all(v["tests_pass"] for v in quality.values())
assert quality["gold"]["flags"] == [] and quality["test tampering"]["flags"] and quality["hard-coding"]["flags"]
### END HIDDEN TESTS

# %% [markdown] slideshow={"slide_type": "subslide"}
# ### 提示辅助恢复：学到的轨迹里不能有提示
#
# KAT 笔记（V2.5）：「对已定位但缺少关键一步的失败轨迹，提示检查测试断言、接口 schema 或已有实现机制」；「从原任务上下文重新生成轨迹，去掉提示及其泄漏信息」；「最终保留无提示、测试通过、与 patch 一致的轨迹」。
#
# 玩具版：agent 只有在提示下才修得对；拿到验证通过的 patch 后，从原上下文重新生成轨迹，三个候选里只有「不提提示、patch 一致、测试通过」的那条被保留。patch 用上面 sandbox 的结果判定。

# %% slideshow={"slide_type": "subslide"}
hint = "check the assert in test_round_price_half_up"
verified_ok = {task.gold_patch.strip(): quality["gold"]["tests_pass"]}
verify = lambda patch: verified_ok.get(patch.strip(), False)
solve = lambda ctx, seed: Attempt("read money.py, read the failing assert, used Decimal", task.gold_patch if "Hint:" in ctx else "")
regenerated = [Attempt(f"as the hint says, {hint} ... used Decimal", task.gold_patch),          # leaks the hint
               Attempt("read money.py, rounded with round()", ""),                                # no fix
               Attempt("read money.py, saw round() rounds 0.125 down, used Decimal with ROUND_HALF_UP", task.gold_patch)]
recovered = hint_recovery(task.issue, hint, solve, lambda ctx, patch, seed: regenerated[seed], verify, attempts=3)
print("without the hint the agent fixes it:", verify(solve(task.issue, 0).patch))
print("kept trajectory:", recovered.kept.trajectory if recovered.kept else None)
print("rejected:", recovered.rejected)
_ = record("hint_recovery_rejected", len(recovered.rejected))
### BEGIN HIDDEN TESTS
assert recovered.kept is regenerated[2] and hint not in recovered.kept.trajectory
### END HIDDEN TESTS

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 4. 训练系统：一条 RL 数据、多个 Harness、直接传 token
#
# KAT 笔记（V2）：「每项 RL 数据包含环境 + 工具集 + Harness/系统提示 + 任务指令 + verifier」。只有构建时通过检查的环境才能成为 RL 数据（`make_rl_datum`）。
#
# KAT 笔记（V2.5）：「随机化调用协议、上下文管理和控制流程，并加入依赖错误、截断输出等扰动」。同一个动作在不同 Harness 里写法不同；
# **verifier 和 reward 必须读规范化的调用**，不能读某一种 Harness 的文本。

# %% slideshow={"slide_type": "subslide"}
datum = make_rl_datum(load_task("money_rounding"), reports["money_rounding"], harness="xml", profile=PR, runner=runner)
print(f"RL datum: env {datum.env!r}, tools {list(datum.tools)}, harness {datum.harness!r}\ninstruction: {datum.instruction}")
try:
    make_rl_datum(load_task("units_broken_env"), reports["units_broken_env"], profile=PR, runner=runner)
except ValueError as exc:
    print("units_broken_env:", str(exc)[:110])
call = ToolCall("edit_file", '{"path": "shop/money.py", "patch": "use Decimal"}')
for protocol in PROTOCOLS:
    text = format_call(call, protocol)
    back = parse_call(text, protocol)
    print(f"{protocol:<5} {text:<78} -> {back.name}({back.arguments})")
rng_h = np.random.default_rng(SEED)
draws = [sample_harness(rng_h, perturb=0.2) for _ in range(200)]
print({p: sum(d["protocol"] == p for d in draws) for p in PROTOCOLS}, "protocols in 200 draws;",
      f"{np.mean([bool(d['perturbations']) for d in draws]):.0%} of episodes perturbed")
print("truncated tool output:", repr(perturb_tool_output("def round_price(amount):\n" * 6, "truncated_output", keep_chars=40)))
_ = record("harness_protocol_counts", {p: sum(d["protocol"] == p for d in draws) for p in PROTOCOLS})

# %% [markdown] slideshow={"slide_type": "subslide"}
# ### 采样端与训练端之间直接传 token
#
# KAT 笔记（V2.5）：「直接使用/generate传递 token，避免 chat 模板重套与重新分词造成训练、采样 token 不一致」。
# 采样得到的是 token id；把它们解码成文本、再分词，得到的 id 可能不同（BPE 会把采样时分开的片段合并；字节级分词会把不完整的 UTF-8 换成替换字符）。
# 训练端就会给一串采样时**从没出现过**的 token 计算概率比。下面用本课模型自己采样 32 条序列，数一数有多少条经过文本往返后变了。

# %% slideshow={"slide_type": "subslide"}
from course_lib.agentic.harness import sample_continuations

with torch.no_grad():
    start = torch.tensor([tok.encode("def ")] * 32)
    sampled = sample_continuations(model, start, 24, seed=SEED)[:, start.shape[1]:].tolist()
changed = [token_mismatch(s, retokenize(s, tok.decode, tok.encode)) for s in sampled]
n_changed = sum(c["first_diff"] is not None for c in changed)
print(f"{n_changed} of {len(sampled)} sampled sequences come back as other token ids after decode -> encode "
      f"({tok.note}); passing the ids through changes none")
example = next((s for s, c in zip(sampled, changed) if c["first_diff"] is not None), None)
if example is not None:
    back = retokenize(example, tok.decode, tok.encode)
    d = token_mismatch(example, back)["first_diff"]
    print(f"e.g. sampled ids {example[d:d + 4]} -> retokenised {back[d:d + 4]} at position {d}")
_ = record("token_roundtrip_changed", n_changed)

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 小结 (Recap)
#
# - **Tree training**：trie + DFS 展平 + ancestor mask + 原始 position ids + 分支数权重 ⇒ 与逐条训练**逐梯度相等**。只对 loss 线性于权重时能把权重加到共享节点上；PPO 裁剪要按每条轨迹分别计算（共享 token 的 log-prob 仍只算一次）。显存上限下：排序 + DP 分组。
# - **EM-SFT / TST**：失败的调用（harness 状态 `error: true`）留在上下文、loss 为 0；在上下文被改写的地方拆开轨迹，每个输出在它真正看到的上下文上训练。
# - **可验证环境与轨迹质量**：收集率 ≥ 90%、重复确认、F2P/P2P；故障样本排除而不是打 0 分；测试通过的轨迹还要过规则（篡改、硬编码……）；提示恢复只留不含提示的轨迹。
# - **训练系统**：RL 数据 = 环境 + 工具 + Harness 提示 + 指令 + verifier；多 Harness 随机化时 reward 读规范化的调用；token 直接传，不经文本往返。
# - 第09课：这些 reward 怎样变成梯度。
