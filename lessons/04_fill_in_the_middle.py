# %% [markdown] slideshow={"slide_type": "slide"}
# # 第04课 填充中间（Fill-in-the-Middle）：给左到右的模型一双"看见后文"的眼睛
#
# 本课把第 01–03 课整理好的代码变成**会补全中间**的训练数据，并在 CPU 上**真的训练**一个课程自己的小代码模型（Qwen2 架构，约 2.4M 参数）。后面的第 05–08 课都会用到它。
#
# **学习目标**
# 1. 说清 FIM 的数据变换：在两个均匀的**字符**位置切开文档，按 PSM / SPM 重排，并用 sentinel token 标出三段；
# 2. 理解 `fim_rate`、`spm_rate`，以及 document-level 与 context-level（在 packed sequence 上）两种做法的差别；
# 3. 区分 **label mask**（哪些位置算 loss，L_FIM 只算 middle）与 **attention mask**（每个位置能看到谁）；
# 4. 用同样的步数训练两次（不用 FIM / FIM 0.5），对照论文的 "FIM for free"（左到右的 loss 几乎不变，却多了补全中间的能力），看它在这个玩具规模上测出来是什么样。

# %% slideshow={"slide_type": "skip"} tags=["parameters"]
PROFILE = "ci"        # "ci": CPU, offline, minutes; "full": a GPU and the hub
SEED = 0
N_DEMO_DOCS = None    # documents in the fim_rate statistics (None: from the profile)
N_INFILL_TASKS = 24   # held-out lines each model must fill in
N_PROBE_TASKS = 60    # held-out tasks per class of short middles (fim_probe)
TRAIN_STEPS = None    # None: tiny_model.train_steps of the profile (ci 300); a smaller number trains a short pair

# %% slideshow={"slide_type": "skip"}
import difflib
import json
import random
import time

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from course_lib import exercises, get_profile, record
from course_lib.paths import display_path
from course_lib.training import bench_results, fim, fim_probe, tinymodel

P = get_profile(PROFILE)
N_DEMO_DOCS = N_DEMO_DOCS or P.fim.demo_docs
random.seed(SEED)
torch.manual_seed(SEED)
print(P.summary().splitlines()[0])
print("fim:", dict(P.fim))

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 为什么要"填中间"？
#
# 传统的预训练是从左到右的 causal language modeling（CLM），目标（讲义第二部分）是
#
# $$\mathcal{L}_{\text{CLM}} = -\sum_{t} \log P(x_t \mid x_{<t})$$
#
# 在 IDE 里，光标往往停在一个文件的**中间**：上面有 import 和函数签名（prefix），下面还有调用、返回值和别的函数（suffix）。
# 一个只会从左往右续写的模型只看得到 prefix，用不上光标之后的代码 $x_{>t}$。FIM 把文档切成 Prefix、Middle、Suffix 三段，
# 要模型学的是
#
# $$P(\text{Middle} \mid \text{Prefix}, \text{Suffix})$$
#
# Bavarian et al. (2022, *Efficient Training of Language Models to Fill in the Middle*) 的做法非常简单：**不改模型，只改数据**。
#
# - 把文档切成 prefix / middle / suffix 三段；
# - 用 sentinel 把 middle 挪到最后：`<PRE> prefix <SUF> suffix <MID> middle <EOT>`；
# - 模型照常做 next-token prediction。推理时给出 `<PRE> prefix <SUF> suffix <MID>`，让它生成 middle。
#
# StarCoder 的 sentinel 叫 `<fim_prefix>` / `<fim_suffix>` / `<fim_middle>`，Qwen2.5-Coder 叫 `<|fim_prefix|>` / `<|fim_suffix|>` / `<|fim_middle|>`（还有 `<|repo_name|>`、`<|file_sep|>` 用于仓库级数据）。`course_lib.training.fim` 两种都支持。

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 第一步：在两个均匀的字符位置切开
#
# 训练数据就是第 01–03 课的产物：有许可证、过滤过、脱敏过、去重过、**按依赖排好序**的语料（`deps.load_ordered_corpus`），
# 一个仓库一条样本（`<|repo_name|>`、`<|file_sep|>` 标记）。`tinymodel.pretraining_corpus` 是唯一的读取入口：
# 每个仓库取依赖顺序最前面的 Python 文件（到 `repo_chars` 个字符为止——被别人依赖的文件排在前面），
# 按仓库名的哈希留出约 1/10 的**整个仓库**做 held-out，训练时一次也看不到。缓存里没有 01–03 的产物时，它会先把它们建出来。
# 为了让一个只训练一分钟的 2.4M 参数模型把力气花在代码结构上，我们去掉了 docstring 和整行注释（`tinymodel.strip_docstrings_and_comments`）——真正的 code LLM 会保留它们。
# 讲义的预训练语料是整个 GitHub 规模；本课只取每个仓库依赖顺序的开头约 12,000 个字符，因为 CPU 上的训练预算只有几十万个 token。

# %% slideshow={"slide_type": "subslide"}
corpus = tinymodel.pretraining_corpus(P)
info = corpus.info
print(f"{info['repositories']} repositories in lesson 03's ordered corpus (fingerprint {info['fingerprint']}): "
      f"{info['train_repos']} for training, {info['held_out_repos']} held out; {info['files_used']} Python files used, "
      f"{info['skipped_not_python']} non-Python files skipped, {info['skipped_unparsable']} unparsable")
print("held-out repositories:", ", ".join(info["held_out_names"]))
print(f"training text: {info['train_chars']:,} characters (at most {info['repo_chars']:,} per repository)")
print(corpus.documents("train")[0][:400])
train_docs, held_out_docs = corpus.snippets("train"), corpus.snippets("held_out")   # file pieces for the demos below
print(f"{len(train_docs):,} training and {len(held_out_docs):,} held-out snippets of at most {info['snippet_chars']} characters")
record("pretraining_repos", info["train_repos"]); record("held_out_repos", info["held_out_repos"])
doc = next(d for d in held_out_docs if 300 < len(d) < 500)
prefix, middle, suffix = fim.split_document(doc, SEED)
print(f"cut at characters {len(prefix)} and {len(prefix) + len(middle)} of {len(doc)}")
print("----- prefix -----\n" + prefix)
print("----- middle -----\n" + middle)
print("----- suffix -----\n" + suffix)
assert prefix + middle + suffix == doc

# %% [markdown] slideshow={"slide_type": "subslide"}
# ### 为什么按字符切，而不是按 token 切？
#
# 按 token 切更省事（不用重新分词），但切点永远落在 token 边界上。推理时用户的光标可以在任何字符处，比如 `retu|`：
# 模型要会把 `rn` 补完。下面统计一下：**随机的字符切点有多大比例落在某个 token 的内部？** 这些情况按 token 切的训练数据里一次也不会出现。
# （这里先拿到课程的 tokenizer：byte-level BPE，4,096 个 token，在训练仓库的文本上训练；第一次调用时训练并缓存。）

# %% slideshow={"slide_type": "-"}
tokenizer = tinymodel.course_tokenizer(P)
rng = random.Random(SEED)
inside, total = 0, 0
for d in held_out_docs[:300]:
    offsets = tokenizer(d, return_offsets_mapping=True, add_special_tokens=False)["offset_mapping"]
    boundaries = {0, len(d)} | {start for start, _ in offsets}
    for cut in fim.split_points(len(d), rng):
        total += 1
        inside += cut not in boundaries
share_inside = inside / total
print(f"{share_inside:.0%} of {total} uniform character cuts fall inside a token")
record("char_cuts_inside_token", round(share_inside, 3))

# one example: a cut inside a token, the way the token-level split would never show it
d = held_out_docs[7]
enc = tokenizer(d, return_offsets_mapping=True, add_special_tokens=False)
start, end = next((s, e) for s, e in enc["offset_mapping"] if e - s >= 5 and d[s:e].strip().isidentifier())
cut = start + (end - start) // 2
print(f"token {d[start:end]!r}: a character cut gives prefix ...{d[max(0, cut - 20):cut]!r} + middle {d[cut:end]!r}...")
p_ids, m_ids, s_ids = fim.split_tokens(enc["input_ids"], SEED)
print("token-level split: middle starts with a whole token:", repr(tokenizer.decode(m_ids[:3])))

# %% [markdown] slideshow={"slide_type": "slide"}
# ## PSM 与 SPM：把 middle 挪到最后
#
# | 模式 | 训练样本的排列 |
# |---|---|
# | PSM | `<PRE>` prefix `<SUF>` suffix `<MID>` middle `<EOT>` |
# | SPM（讲义的写法） | `<SUF>` suffix `<PRE>` prefix `<MID>` middle `<EOT>` |
# | SPM（bigcode / StarCoder 训练代码的写法） | `<PRE>` `<SUF>` suffix `<MID>` prefix middle `<EOT>` |
#
# SPM 先给 suffix 再给 prefix：用户在光标处（prefix 末尾）打字时，变化的只是 prompt 的尾部，前面 suffix 的 KV cache 不用重算。训练时通常 `spm_rate = 0.5`：FIM 样本中一半用 PSM，一半用 SPM。
#
# 讲义说 SPM 在 CodeGeeX、StarCoder 等研究中被证明能进一步提升性能，因为模型先读 suffix；本课只引用能核对的来源——FIM 论文（Bavarian et al. 2022）报告 SPM 略好于 PSM、建议两种排列一起训练（StarCoder 的训练代码即 `spm_rate` 0.5）——因为本课没有找到 CodeGeeX 对两种排列的比较，本课的小模型上也没有测两者的差别。

# %% [markdown] slideshow={"slide_type": "subslide"}
# **StarCoder 的训练代码用哪一种？** bigcode 的 Megatron-LM（`gpt_dataset.py` 里的 `permute`）拼的是第三行：`[<fim_prefix>, <fim_suffix>] suffix [<fim_middle>] prefix middle`，代码注释称之为 FIM 论文里 SPM 的 "variant 2"。原因在排列本身：`<MID>` 之后 prefix 和 middle 紧挨着，正是原文件里的顺序，middle 只是 prefix 的普通左到右续写——和不做 FIM 的训练、和 PSM 里"接着写"的技能是同一种；推理时 prompt 以用户光标前的最后一个字符结束，模型接着写即可。
#
# 讲义 SPM 写作 `<SUF> s <PRE> p <MID> m <EOT>`；本课两种都实现（`fim.spm_transform(..., layout="lecture" | "bigcode")`），训练和推理用 bigcode 的排列（`layout` 的默认值），因为课程模型的数据变换照 StarCoder 的训练代码做，prompt 必须和训练时的排列一致。

# %% slideshow={"slide_type": "subslide"}
example = ("def add(a, b):\n    ", "return a + b", "\n\nprint(add(1, 2))\n")
for style in ["starcoder", "qwen2.5-coder"]:
    print(f"--- {style}: PSM")
    print(fim.psm_transform(*example, sentinels=style))
    for layout in ["lecture", "bigcode"]:
        print(f"--- {style}: SPM, layout={layout!r}")
        print(fim.spm_transform(*example, sentinels=style, layout=layout))

COLORS = {"sentinel": "#444444", "prefix": "#4c72b0", "suffix": "#dd8452", "middle": "#55a868",
          "prefix+middle": "#8fbc8f", "plain": "#bbbbbb", "eot": "#c44e52", "pad": "#eeeeee"}

def draw_layout(ax, parts, title):
    x = 0
    for label, text in parts:
        width = max(len(text), 4)
        color = COLORS["sentinel"] if label.startswith("<") else COLORS[label]
        ax.barh(0, width, left=x, color=color, edgecolor="white")
        ax.text(x + width / 2, 0, label, ha="center", va="center", color="white", fontsize=9)
        x += width
    ax.set_xlim(0, x); ax.set_yticks([]); ax.set_xticks([]); ax.set_title(title, loc="left", fontsize=10)

p, m, s = example
fig, axes = plt.subplots(3, 1, figsize=(10, 2.6))
draw_layout(axes[0], [("prefix", p), ("middle", m), ("suffix", s)], "original document")
draw_layout(axes[1], [("<PRE>", ""), ("prefix", p), ("<SUF>", ""), ("suffix", s), ("<MID>", ""), ("middle", m), ("eot", "")], "PSM")
draw_layout(axes[2], [("<PRE>", ""), ("<SUF>", ""), ("suffix", s), ("<MID>", ""), ("prefix", p), ("middle", m), ("eot", "")], "SPM (bigcode)")
plt.tight_layout(); plt.show()


# %% [markdown] slideshow={"slide_type": "subslide"}
# ### 练习 1：写出 PSM 变换
#
# `sentinels` 是一个 `fim.FimSentinels`，有属性 `prefix`、`suffix`、`middle`、`eot`（字符串）。返回 `<PRE> prefix <SUF> suffix <MID> middle <EOT>` 拼成的字符串（中间没有空格）。

# %% slideshow={"slide_type": "-"}
def my_psm_transform(prefix, middle, suffix, sentinels):
    ### BEGIN SOLUTION
    s = sentinels
    return s.prefix + prefix + s.suffix + suffix + s.middle + middle + s.eot
    ### END SOLUTION

my_psm_transform = exercises.check("04-1", my_psm_transform)


# %% [markdown] slideshow={"slide_type": "subslide"}
# ### 练习 2：写出 SPM 变换（两种排列）
#
# `layout="lecture"` 返回讲义的 `<SUF> suffix <PRE> prefix <MID> middle <EOT>`；`layout="bigcode"` 返回 StarCoder 训练代码的 `<PRE><SUF> suffix <MID> prefix middle <EOT>`。

# %% slideshow={"slide_type": "-"}
def my_spm_transform(prefix, middle, suffix, sentinels, layout="lecture"):
    ### BEGIN SOLUTION
    s = sentinels
    if layout == "bigcode":
        return s.prefix + s.suffix + suffix + s.middle + prefix + middle + s.eot
    return s.suffix + suffix + s.prefix + prefix + s.middle + middle + s.eot
    ### END SOLUTION

my_spm_transform = exercises.check("04-2", my_spm_transform)

# %% [markdown] slideshow={"slide_type": "slide"}
# ## fim_rate 与 spm_rate
#
# 不是每个文档都做 FIM：以概率 `fim_rate` 变换（论文和 StarCoder 用 0.5），其余保持普通的左到右文本；FIM 样本里再以 `spm_rate` 选 SPM。
# 论文的结论是 fim_rate 到 0.9 都几乎不损害左到右能力（"FIM for free"）。下面在真实片段上检查比例。

# %% slideshow={"slide_type": "-"}
demo_docs = train_docs[:N_DEMO_DOCS]
fim_docs, counts = fim.apply_fim_document_level(demo_docs, SEED, fim_rate=P.fim.fim_rate,
                                                spm_rate=P.fim.spm_rate, sentinels="starcoder")
n_fim = counts["psm"] + counts["spm"]
fim_share, spm_share = n_fim / len(demo_docs), counts["spm"] / max(1, n_fim)
print(counts, f"-> FIM share {fim_share:.3f} (want {P.fim.fim_rate}), SPM share among FIM {spm_share:.3f} (want {P.fim.spm_rate})")
record("fim_share", round(fim_share, 4))
_ = record("spm_share_within_fim", round(spm_share, 4))

fig, ax = plt.subplots(figsize=(5, 2.4))
ax.bar(list(counts), list(counts.values()), color=[COLORS["plain"], COLORS["middle"], COLORS["prefix+middle"]])
ax.set_title(f"{len(demo_docs)} documents, fim_rate={P.fim.fim_rate}, spm_rate={P.fim.spm_rate}")
plt.tight_layout(); plt.show()

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Document-level 与 context-level
#
# 预训练把很多文档用 `<EOT>` 拼接（packing），再切成长度为 `seq_len` 的窗口。FIM 可以放在两个位置：
#
# - **document-level**：先对整个文档做 FIM，再 packing。长文档被切到多个窗口里，`<PRE>`、`<SUF>`、`<MID>` 常常不在同一个窗口：模型看到 middle 时，prefix 已经不在上下文里了。
# - **context-level**（bigcode Megatron 的做法）：先 packing，再在每个窗口内按 `<EOT>` 切出文档片段，对每个片段做 FIM（解码→按字符切→重新分词）。窗口长度保持不变：变长时（三个 sentinel，加上重新分词可能多出的 token）截掉 suffix 的尾部，变短时在 suffix 后面补 `<fim_pad>`；suffix 短到吸收不了多出来的 token 时，这个片段**保持原样**（普通左到右文本），绝不截断 middle——middle 正是模型要学会补全的部分。
#
# 先量一量 document-level 的问题有多常见（`seq_len` 取模型训练用的 256）：

# %% slideshow={"slide_type": "subslide"}
SEQ = P.tiny_model.seq_len
Q = fim.get_sentinels("qwen2.5-coder")
ids_of = {name: tokenizer.convert_tokens_to_ids(tok) for name, tok in
          [("pre", Q.prefix), ("suf", Q.suffix), ("mid", Q.middle), ("eot", Q.eot), ("pad", Q.pad)]}
doc_level, _ = fim.apply_fim_document_level(train_docs[:400], SEED, fim_rate=1.0, sentinels=Q)
stream = []
for text in doc_level:
    stream += tokenizer(text, add_special_tokens=False)["input_ids"]
pre_pos = [i for i, t in enumerate(stream) if t == ids_of["pre"]]
mid_pos = [i for i, t in enumerate(stream) if t == ids_of["mid"]]
split_apart = sum(a // SEQ != b // SEQ for a, b in zip(pre_pos, mid_pos))
print(f"document-level: {split_apart} of {len(pre_pos)} FIM documents have <PRE> and <MID> in different {SEQ}-token windows "
      f"({split_apart / len(pre_pos):.0%})")
_ = record("doc_level_split_share", round(split_apart / len(pre_pos), 3))

# %% slideshow={"slide_type": "subslide"}
short_docs = [d for d in held_out_docs if 60 < len(d) < 220][:12]   # short documents: several per window
plain_ids = [tokenizer(d, add_special_tokens=False)["input_ids"] for d in short_docs]
window = tinymodel.pack_windows(plain_ids, 128, ids_of["eot"])[0]
ctx_window, modes = fim.apply_fim_context_level(window, tokenizer, random.Random(SEED + 2), fim_rate=1.0,
                                               spm_rate=0.5, sentinels=Q)
print("fragments in the window:", modes, "| length before/after:", len(window), len(ctx_window))

# how often a fragment drawn for FIM stays plain because its suffix cannot absorb the sentinels
# (fim_rate 1.0: every "plain" below is such a fragment), on the model's own 256-token windows
train_windows = tinymodel.pack_windows([tokenizer(d, add_special_tokens=False)["input_ids"] for d in train_docs[:600]],
                                       SEQ, ids_of["eot"])
all_modes, ctx_rng = [], random.Random(SEED)
for w in train_windows[:80]:
    all_modes += fim.apply_fim_context_level(w, tokenizer, ctx_rng, fim_rate=1.0, sentinels=Q)[1]
kept_plain = fim.fim_mode_counts(all_modes)["plain"]
print(f"{len(all_modes)} fragments in {min(80, len(train_windows))} windows of {SEQ} tokens, all drawn for FIM: "
      f"{kept_plain} ({kept_plain / len(all_modes):.1%}) stayed plain text (no room for the sentinels), the rest "
      f"are PSM/SPM with their middle whole")
_ = record("context_fim_kept_plain_share", round(kept_plain / len(all_modes), 4))

SEG_ORDER = list(COLORS)
def segment_image(ids):
    segs = fim.fim_segments(ids, ids_of["pre"], ids_of["suf"], ids_of["mid"], ids_of["eot"], ids_of["pad"])
    return np.array([[SEG_ORDER.index(s) for s in segs]])

from matplotlib.colors import ListedColormap
from matplotlib.patches import Patch
cmap = ListedColormap(list(COLORS.values()))
fig, axes = plt.subplots(2, 1, figsize=(11, 2.4))
fig.subplots_adjust(hspace=1.0)
for ax, ids, title in [(axes[0], window, "packed window (plain causal LM)"), (axes[1], ctx_window, "after context-level FIM")]:
    ax.imshow(segment_image(ids), cmap=cmap, vmin=0, vmax=len(SEG_ORDER) - 1, aspect="auto")
    ax.set_yticks([]); ax.set_title(title, loc="left", fontsize=9)
axes[1].set_xlabel("token position")
fig.legend(handles=[Patch(color=c, label=k) for k, c in COLORS.items()], ncol=8, loc="lower center",
           bbox_to_anchor=(0.5, -0.25), fontsize=8)
plt.show()
print(tokenizer.decode(ctx_window))


# %% [markdown] slideshow={"slide_type": "slide"}
# ## 损失掩码：L_FIM 只算 middle
#
# 普通 causal LM 对每个位置都算 next-token loss。讲义的 FIM 目标只在 middle 的 token 上求和：
#
# $$\mathcal{L}_{\text{FIM}} = -\sum_{i \in \text{Middle}} \log P(x_i \mid \text{Prefix}, \text{Suffix}, x_{<i \in \text{Middle}})$$
#
# 在 PSM 排列里，middle 的第 $i$ 个 token 左边恰好是 `<PRE>` prefix `<SUF>` suffix `<MID>` 和它之前的 middle token，
# 所以这就是普通的 next-token loss $-\log P(x_t \mid x_{<t})$，只在 middle 的位置求和。
#
# 实现上不改模型，只改 **labels**：不算 loss 的位置填 `-100`（PyTorch `cross_entropy` 的 `ignore_index`）。
# 讲义训练时只算 `<MID>` 之后 token 的 loss；本课训练时算全部 token 的 loss，L_FIM 只用来**评估**补全能力，因为一半样本是普通的左到右文本、prefix 和 suffix 本身也值得学（bigcode 的训练代码同样如此）。

# %% [markdown] slideshow={"slide_type": "subslide"}
# ### 练习 3：构造只含 middle 的 label
#
# 输入 token id 列表 `ids`、`<MID>` 的 id 和 `<EOT>` 的 id。返回同样长度的 `labels`：middle token（`<MID>` 之后直到下一个 `<EOT>`，两者都不含）保留原 id，其余位置为 `-100`。一个序列里可能有好几个文档。

# %% slideshow={"slide_type": "-"}
def my_middle_only_labels(ids, middle_id, eot_id):
    ### BEGIN SOLUTION
    labels, inside = [], False
    for t in ids:
        if t == eot_id:
            inside = False
        labels.append(t if inside else -100)
        if t == middle_id:
            inside = True
    return labels
    ### END SOLUTION

my_middle_only_labels = exercises.check("04-3", my_middle_only_labels)

# %% [markdown] slideshow={"slide_type": "subslide"}
# ### label mask 与 attention mask 是两回事
#
# - **label mask**：哪些位置的预测**计入 loss**（上面的 `-100`）。
# - **attention mask**：每个位置**能看到**哪些位置。causal LM 是下三角；packing 时还可以做成按文档分块的下三角，让一个文档看不到前一个文档。
#
# FIM 不需要任何特殊的 attention：`<MID>` 之后的 middle 在左边已经"看见"了 prefix 和 suffix——这正是把 middle 挪到最后的意义。下面的格子图里，middle 那几行在普通因果 mask 下已经覆盖了全部 prefix 和 suffix 列。
#
# 讲义说 FIM 模式下 attention mask "不再是严格的下三角"、prefix 与 suffix 双向可见；本课用普通的下三角（因果）mask 训练 PSM/SPM，因为 middle 排在最后，因果 mask 已让它看到全部上下文，StarCoder 等的训练也是如此。只有 prefix-LM 式的变体（让 prefix+suffix 这段上下文内部双向注意，`fim.prefix_lm_attention_mask`）才需要非三角的 mask——那是另一种模型，推理时也得按同样的 mask 来算。

# %% slideshow={"slide_type": "subslide"}
small = ([tokenizer.convert_tokens_to_ids(t) for t in [Q.prefix]] + tokenizer("x = f(a,", add_special_tokens=False)["input_ids"]
         + [ids_of["suf"]] + tokenizer(")\n", add_special_tokens=False)["input_ids"] + [ids_of["mid"]]
         + tokenizer(" b", add_special_tokens=False)["input_ids"] + [ids_of["eot"]]
         + tokenizer("y = 2\n", add_special_tokens=False)["input_ids"] + [ids_of["eot"]])
labels_lm = fim.causal_lm_labels(small)
labels_fim = my_middle_only_labels(small, ids_of["mid"], ids_of["eot"])
tokens = [tokenizer.decode([t]).replace("\n", "\\n") for t in small]

fig, axes = plt.subplots(1, 3, figsize=(13, 4.2), gridspec_kw={"width_ratios": [1.1, 1, 1]})
rows = np.array([[l != -100 for l in labels_lm], [l != -100 for l in labels_fim]], dtype=float)
axes[0].imshow(rows, cmap="Greens", vmin=0, vmax=1.3, aspect="auto")
axes[0].set_yticks([0, 1], ["causal LM\nlabels", "L_FIM\nlabels"])
axes[0].set_xticks(range(len(tokens)), tokens, rotation=90, fontsize=8)
axes[0].set_title("label mask (green = counted in the loss)", fontsize=10)
for ax, per_doc, title in [(axes[1], False, "attention: causal"), (axes[2], True, "attention: causal, per document")]:
    ax.imshow(fim.packed_attention_mask(small, ids_of["eot"], per_document=per_doc), cmap="Blues", vmin=0, vmax=1.3)
    ax.set_xticks(range(len(tokens)), tokens, rotation=90, fontsize=7)
    ax.set_yticks(range(len(tokens)), tokens, fontsize=7)
    ax.set_title(title + "\n(row = query, column = key)", fontsize=10)
plt.tight_layout(); plt.show()
print(f"causal LM scores {sum(l != -100 for l in labels_lm)} of {len(small)} tokens; L_FIM scores {sum(l != -100 for l in labels_fim)}")
causal = fim.packed_attention_mask(small, ids_of["eot"], per_document=False)
first_eot = small.index(ids_of["eot"])
context_cols = [i for i in range(first_eot) if i < small.index(ids_of["mid"])]
middle_rows = [i for i, l in enumerate(labels_fim) if l != -100]
sees_all = all(causal[r, c] for r in middle_rows for c in context_cols)
print(f"causal mask: each of the {len(middle_rows)} middle token(s) sees all {len(context_cols)} prefix/suffix/sentinel "
      f"positions before <MID>: {sees_all}")
print("a prefix-LM mask over that context is not lower-triangular:",
      not np.array_equal(fim.prefix_lm_attention_mask(len(small), len(context_cols)), np.tril(np.ones((len(small),) * 2, dtype=bool))))
### BEGIN HIDDEN TESTS
assert sees_all and middle_rows
### END HIDDEN TESTS

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 在 CPU 上训练一个小代码模型
#
# 课程自己的模型（`course_lib.training.tinymodel`）：
#
# - **tokenizer**：byte-level BPE（`tokenizers` 库），4,096 个 token，在训练仓库的文本上训练；特殊 token：`<|endoftext|>`（文档结束/pad）、ChatML 的 `<|im_start|>`、`<|im_end|>`（eos），两套 FIM sentinel，`<|repo_name|>`、`<|file_sep|>`；自带 Qwen2.5 风格的 ChatML chat template；
# - **模型**：transformers 的 `Qwen2ForCausalLM`，hidden 192、4 层、GQA（4 个 query head / 2 个 KV head），约 2.4M 参数；
# - **数据**：上面的训练仓库，一个仓库一条依赖顺序的样本，仓库之间用 `<|endoftext|>` 隔开，拼接后切成 256 token 的窗口，窗口按种子打乱；
# - **训练**：固定的步数（不是固定的秒数，这样结果可复现），batch 4 × 256 token，AdamW + cosine；context-level FIM，sentinel 用 Qwen2.5-Coder 风格。（小 batch、多步数：在这么小的预算里，更新次数比每步的 token 数更重要。）
#
# 同样的代码和种子训练两次：`nofim`（fim_rate 0）和 `base`（fim_rate 0.5）。`base` 就是后面课程用的 `get_tiny_model("base")`。
# 结果缓存在课程 cache 里（按配置做 key）：第一次运行会真的训练（下面打印每个模型的训练用时），之后直接读取。
# 训练种子是本课的 `SEED`（0 是后面各课用的那一对）；换种子、换 CPU 都会得到另一对模型，所以结论要和多个种子一起看。

# %% slideshow={"slide_type": "subslide"}
print("vocab:", len(tokenizer), "| special tokens:",
      {t: tokenizer.convert_tokens_to_ids(t) for t in tinymodel.SPECIAL_TOKENS})
line = "    for key, value in sorted(items.items()):\n"
ids = tokenizer(line, add_special_tokens=False)["input_ids"]
print(f"{len(line)} characters -> {len(ids)} tokens:", [tokenizer.decode([i]) for i in ids])
cfg = tinymodel.tiny_config()
with torch.device("meta"):
    n_params = sum(p.numel() for p in AutoModelForCausalLM.from_config(cfg).parameters())
print(f"Qwen2 config: hidden {cfg.hidden_size}, layers {cfg.num_hidden_layers}, heads {cfg.num_attention_heads}/{cfg.num_key_value_heads} -> {n_params:,} parameters")
print(f"budget: {TRAIN_STEPS or P.tiny_model.train_steps} steps x {P.tiny_model.batch_size} x {P.tiny_model.seq_len} tokens")
### BEGIN HIDDEN TESTS
assert len(tokenizer) == 4096 and 2.3e6 < n_params < 2.5e6        # "4,096 个 token", "约 2.4M 参数"
assert (cfg.hidden_size, cfg.num_hidden_layers, cfg.num_attention_heads, cfg.num_key_value_heads) == (192, 4, 4, 2)
assert (P.tiny_model.batch_size, P.tiny_model.seq_len) == (4, 256) or PROFILE != "ci"
### END HIDDEN TESTS

# %% slideshow={"slide_type": "subslide"}
t0 = time.time()
P_models = tinymodel.with_seed(P, SEED, train_steps=TRAIN_STEPS)     # SEED 0: the pair the later lessons use
model_dirs = {}
for name in ["nofim", "base"]:
    cached = (tinymodel.tiny_model_dir(name, P_models) / "model.safetensors").exists()
    model_dirs[name] = tinymodel.get_tiny_model(name, P_models)
    meta = json.loads((model_dirs[name] / "course_model.json").read_text())
    print(f"{name:6s} fim_rate={meta['fim_rate']}: {'loaded from the cache' if cached else 'built now (it was not cached)'}; "
          f"{meta['train_steps']} steps, {meta['tokens_seen']:,} tokens, training took {meta['train_seconds']} s "
          f"({meta['torch_threads']} threads; {meta['epochs']} passes over {meta['corpus']['train_tokens']:,} training tokens) -> {display_path(model_dirs[name])}")
logs = {name: json.loads((d / "training_log.json").read_text()) for name, d in model_dirs.items()}
print(f"({time.time() - t0:.1f} s in this cell)")


# %% slideshow={"slide_type": "subslide"}
def smooth(values, k=9):
    v = np.asarray(values, dtype=float)
    return np.convolve(np.pad(v, (k // 2, k // 2), mode="edge"), np.ones(k) / k, mode="valid")

style = {"nofim": dict(color="#4c72b0", label="no FIM (fim_rate 0)"),
         "base": dict(color="#55a868", label="FIM (fim_rate 0.5)")}
fig, axes = plt.subplots(1, 3, figsize=(14, 3.6))
for name, log in logs.items():
    axes[0].plot(log["step"], smooth(log["train_loss"]), **style[name])
    steps = [e["step"] for e in log["eval"]]
    axes[1].plot(steps, [e["l2r_loss"] for e in log["eval"]], marker="o", **style[name])
    axes[2].plot(steps, [e["middle_loss"] for e in log["eval"]], marker="o", **style[name])
axes[0].set_title("training loss (its own data mix)")
axes[1].set_title("held-out left-to-right loss")
axes[2].set_title("held-out middle-token loss (L_FIM, PSM)")
for ax in axes:
    ax.set_xlabel("step"); ax.set_ylabel("nats / token"); ax.legend(); ax.grid(alpha=0.3)
plt.tight_layout(); plt.show()

final = {name: log["eval"][-1] for name, log in logs.items()}
for name, e in final.items():
    print(f"{name:6s} left-to-right {e['l2r_loss']:.3f}   middle {e['middle_loss']:.3f}")
print(f"(a uniform guess over {len(tokenizer):,} tokens: ln {len(tokenizer):,} = {np.log(len(tokenizer)):.2f} nats/token)")
print("FIM data mix of the base run:", logs["base"]["modes"])
record("l2r_loss_nofim", round(final["nofim"]["l2r_loss"], 4))
record("l2r_loss_fim", round(final["base"]["l2r_loss"], 4))
record("middle_loss_nofim", round(final["nofim"]["middle_loss"], 4))
_ = record("middle_loss_fim", round(final["base"]["middle_loss"], 4))
print(f"left-to-right: FIM - no FIM = {final['base']['l2r_loss'] - final['nofim']['l2r_loss']:+.3f} nats/token")
print(f"middle tokens: FIM - no FIM = {final['base']['middle_loss'] - final['nofim']['middle_loss']:+.3f} nats/token")
# the middle-loss gap at every evaluation of the two runs (same steps, same held-out examples)
gaps = [(a["step"], a["middle_loss"] - b["middle_loss"]) for a, b in zip(logs["nofim"]["eval"], logs["base"]["eval"])]
print("middle-loss gap (no FIM - FIM) by step:", ", ".join(f"{st}: {g:+.3f}" for st, g in gaps))
half = len(gaps) // 2
first_half, second_half = np.mean([g for _, g in gaps[1:half]]), np.mean([g for _, g in gaps[half:]])
print(f"mean gap, first half of training {first_half:+.3f}, second half {second_half:+.3f} -> "
      f"{'grew' if second_half > first_half else 'did not grow'} over this run")
_ = record("middle_gap_by_step", [[st, round(g, 4)] for st, g in gaps])
for key, what in [("l2r_loss", "left-to-right"), ("middle_loss", "middle-token")]:
    lower = "FIM" if final["base"][key] < final["nofim"][key] else "no FIM"
    print(f"this run: the {lower} model has the lower held-out {what} loss")
lowest = min(e[k] for e in final.values() for k in ("l2r_loss", "middle_loss"))
print(f"this run: the lowest of the four held-out losses is {lowest:.2f} nats/token "
      f"({lowest / np.log(len(tokenizer)):.0%} of a uniform guess's ln {len(tokenizer):,} = {np.log(len(tokenizer)):.2f})")
_bench = bench_results.benchmark_result("bench_fim_probe")
if _bench:
    _s = _bench["summary"]
    print(f"over {_s['seeds']} training seeds (benchmarks/results/bench_fim_probe.json, {_bench['cpu']} CPU): the FIM model "
          f"has the lower left-to-right loss in {_s['FIM model lower left-to-right loss']}, the lower middle-token loss in "
          f"{_s['FIM model lower middle-token loss']}; the lowest loss of any seed and model {_s['lowest held-out loss of any seed and model']:.2f}")
### BEGIN HIDDEN TESTS
assert all(np.isfinite(e[k]) for e in final.values() for k in ("l2r_loss", "middle_loss")), final
### END HIDDEN TESTS

# %% [markdown] slideshow={"slide_type": "-"}
# **怎么读这张图**：论文的 "FIM for free" 有两半：(1) FIM 几乎不改变左到右的 loss（中间那张，两条线应该挨得很近）；(2) FIM 模型的 middle loss 更低（右边那张），因为它学过利用 suffix。
# 我们的规模是玩具级的（参数量、token 数和训练用时都打印在上面），语料是第 01–03 课的真实代码：两个模型都还很弱（最后一行把最低的 loss
# 和随机猜的 ln 4096 比）。**上面打印的数字和 "this run" 几行才是这次测到的结果**；论文的结论是在大得多的规模上测出来的。差距在训练中
# 怎样变化，看按 step 打印的那一行（本课没有在更长的训练上测过，所以不说它会怎样）。

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 看看模型补全了什么
#
# 在 held-out 文件里挑一行代码，把它从第一个非空字符到行尾挖掉（光标停在缩进处），让两个模型各自生成 middle（PSM prompt，greedy）。

# %% slideshow={"slide_type": "-"}
models = {name: AutoModelForCausalLM.from_pretrained(d).eval() for name, d in model_dirs.items()}
tok = AutoTokenizer.from_pretrained(model_dirs["base"])
tasks = fim.line_infill_tasks(held_out_docs, N_INFILL_TASKS, seed=SEED)
t0 = time.time()
answers = {name: [fim.infill(m, tok, p, s, sentinels="qwen2.5-coder", max_new_tokens=24, stop_at_newline=True)
                  for p, _, s in tasks] for name, m in models.items()}
print(f"{len(tasks)} tasks x {len(models)} models in {time.time() - t0:.1f} s")

def similarity(a, b):
    return difflib.SequenceMatcher(None, a.strip(), b.strip()).ratio()

for name in models:
    em = np.mean([a.strip() == m for a, (_, m, _) in zip(answers[name], tasks)])
    sim = np.mean([similarity(a, m) for a, (_, m, _) in zip(answers[name], tasks)])
    print(f"{name:6s} exact match {em:.0%}   mean character similarity {sim:.2f}")
    record(f"line_infill_exact_{name}", round(float(em), 3))
    record(f"line_infill_similarity_{name}", round(float(sim), 3))
_bench = bench_results.benchmark_result("bench_fim_probe")
if _bench:
    print(f"over {_bench['summary']['seeds']} training seeds (benchmarks/results/bench_fim_probe.json): at most "
          f"{_bench['summary']['line infill exact matches, most of any seed and model']} of "
          f"{_bench['summary']['line infill tasks']} lines exactly right, for any seed and model")

# %% slideshow={"slide_type": "subslide"}
for (p, m, s), a_base, a_nofim in list(zip(tasks, answers["base"], answers["nofim"]))[:P.fim.infill_examples]:
    before = "".join(p.splitlines(keepends=True)[-3:])
    after = "".join(s.splitlines(keepends=True)[:3])
    print("─" * 80)
    print(before + "█" + after.rstrip("\n"))
    print(f"   truth : {m!r}\n   FIM   : {a_base.strip()!r}\n   no FIM: {a_nofim.strip()!r}")

# %% [markdown] slideshow={"slide_type": "subslide"}
# ### 这个规模上做不到的事
#
# **整行补全，两个模型都做不到**：exact match 见上（这次运行和多种子的记录），补出来的多是重复的符号和数字。补一整行要知道这个文件里的名字、
# 调用的 API 和逻辑；这个模型只有约 2.4M 参数，见过的 token 数打印在训练那一格（几十万个），而 Qwen2.5-Coder 见过的是它的几百万倍。
# 同样的 PSM prompt、同样的 `fim.infill` 函数，换成那样的模型，就是 IDE 里的代码补全——这一节只把**流程**看清楚。
# no-FIM 模型从没见过 `<|fim_middle|>`：它只是在 suffix 后面接着写；FIM 模型见过这种排列，但见过不等于学会。
#
# 那 FIM 训练到底教会了它什么没有？要在它**有可能**答对的地方问：下一节。

# %% [markdown] slideshow={"slide_type": "slide"}
# ## FIM 在哪种"短中间"上有用？
#
# 三类 held-out 任务，光标都在一行的开头，middle 短而有规律（`course_lib.training.fim_probe`）：
#
# - `closing`：一行只有右括号（`)`、`]`、`})` …）；
# - `return`：`return <表达式>` 这一行开头的缩进和 `return`（表达式留在 suffix 里）；
# - `name_from_suffix`：`NAME = …` 这一行被赋值的名字，它**不在 prefix 里、但在 suffix 里出现**——只有读 suffix 才知道。
#
# 两种测量：**贪心续写**对不对（以 middle 开头就算对），以及模型觉得真正的 middle 有多可能——它的 loss（每个**字符**的 nats，
# 两种分词才能比）。四种做法：FIM 模型读 PSM prompt（`fim_psm`，看得见 suffix）或只读 prefix（`fim_l2r`），no-FIM 模型同样两种
# （`nofim_psm` 从没见过 sentinel；`nofim_l2r` 就是编辑器里不用 FIM 时的做法）。
# "FIM 有用"的标准：`fim_psm` 给真 middle 的 loss 比 `nofim_l2r` 低的任务显著更多（配对符号检验，p < 0.05）。

# %% slideshow={"slide_type": "subslide"}
t0 = time.time()
probe = fim_probe.compare(models, tok, held_out_docs, n=N_PROBE_TASKS, seed=SEED)
probe_table = pd.DataFrame([r.row() for r in probe]).set_index("class")
helped = [r.kind for r in probe if r.fim_helps()]
print(f"{sum(r.tasks for r in probe)} tasks in {time.time() - t0:.0f} s")
print("greedy answers right, FIM with the suffix / no-FIM left to right:",
      {r.kind: f"{r.right['fim_psm']} / {r.right['nofim_l2r']} of {r.tasks}" for r in probe})
print("FIM gives the true middle a lower loss than no-FIM left to right (sign test p < 0.05) on:",
      helped or "none of the classes")
record("fim_probe_right", {r.kind: {"tasks": r.tasks, **r.right} for r in probe})
record("fim_probe_nll", {r.kind: {k: round(v, 4) for k, v in r.nll.items()} for r in probe})
_ = record("fim_probe_helps", helped)
probe_table.T

# %% slideshow={"slide_type": "subslide"}
# this run's statements, then the same statements over several training seeds (benchmarks/bench_fim_probe.py)
this_run = fim_probe.statements(probe)
for statement, holds in this_run.items():
    print(f"this run: {statement}: {'yes' if holds else 'no'}")
bench_probe = bench_results.benchmark_result("bench_fim_probe")
if bench_probe is None:
    print("no multi-seed result recorded: run PYTHONPATH=$PWD python benchmarks/bench_fim_probe.py "
          "--json benchmarks/results/bench_fim_probe.json")
else:
    summary = bench_probe["summary"]
    print(f"over {summary['seeds']} training seeds (benchmarks/results/bench_fim_probe.json, {bench_probe['cpu']} CPU, fp32):")
    for statement in this_run:
        n = summary.get(statement)
        if n is not None:
            print(f"  {statement}: {n} of {summary['seeds']} seeds"
                  + ("" if n in (0, summary["seeds"]) else " (the seeds disagree: this run alone decides nothing)"))
    print("  FIM helped (p < 0.05), per class, in how many seeds:", summary["helped, per class"])
_ = record("fim_probe_statements", this_run)

# %% slideshow={"slide_type": "subslide"}
for r in probe:
    task, answers_of = r.examples[0]
    print("─" * 80)
    print(f"[{r.kind}] ...{task.prefix[-80:]}█{task.suffix[:60]}...")
    print(f"   truth: {task.middle!r}")
    for name, a in answers_of.items():
        print(f"   {name:<10} {a[:40]!r}  {'✓' if fim_probe.is_right(a, task.middle) else '✗'}")
print("─" * 80)
### BEGIN HIDDEN TESTS
assert len(probe) == 3 and all(r.tasks > 0 for r in probe), [(r.kind, r.tasks) for r in probe]
assert all(0 <= r.p_value <= 1 and 0 <= r.format_p_value <= 1 for r in probe), [(r.p_value, r.format_p_value) for r in probe]
### END HIDDEN TESTS

# %% [markdown] slideshow={"slide_type": "subslide"}
# **读表**：结论以上面打印的 "this run" 几行为准，再和下面的多种子结果对照——一次运行只是一个种子、一台 CPU。
# 表里要看三行：`FIM helps (p < 0.05)`（读了 suffix 的 FIM 模型是否在显著更多的任务上给真 middle 更低的 loss）、
# `fim_psm lower / higher than nofim_l2r`（逐题比较的计数）、`p (same prompt)`（和拿同样 PSM prompt、却从没见过这种格式的 no-FIM 模型比）。
# 多种子的结论看上面 "over N training seeds" 几行（基准还没记录时，那里打印生成它的命令）；贪心续写的例子见上一格。
#
# 为什么难：读 PSM 样本要"跳着读"——先读 suffix、再回到 prefix 末尾接着写——这比左到右难得多；这个模型只有约 2.4M 参数，
# 只有一部分训练样本是 FIM 格式（上面打印的 FIM data mix）。论文的 "FIM for free" 是在大得多的模型和数据上测出来的。

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 实验：第03课的依赖顺序，对模型有没有用？
#
# 第03课的理由是 $P(\text{repo}) = \prod_i P(f_i \mid f_{<i})$：按依赖顺序拼接，模型读到一个文件时，它 import 的文件已经在上下文里，
# 后面的文件应该更好预测。这里直接测：从 `base` 出发，**继续训练两次**——同样的训练仓库、同样的文件、同样的步数和种子，
# 只有仓库内文件的顺序不同（依赖顺序 vs 仓库内随机打乱）；然后按依赖顺序读 held-out 仓库，比较**后半部分文件**的 loss
# （`tinymodel.dependency_order_experiment`）。
#
# 讲义的论断针对完整仓库、长上下文的大模型；本课每个文件只取开头 600 个字符、上下文 512 token、每次继续训练 40 步，因为 CPU 上只有几十秒的预算——一个窗口能装下好几个文件，顺序才有机会起作用。

# %% slideshow={"slide_type": "subslide"}
t0 = time.time()
order_result = tinymodel.dependency_order_experiment(P)
print(f"{order_result['train_repos']} training repositories, {order_result['eval_repos']} held-out repositories; "
      f"{order_result['steps']} steps x {order_result['batch_size']} x {order_result['seq_len']} tokens per arm, "
      f"files cut to {order_result['file_chars']} characters")
print(f"{'model':<32}{'later files':>12}{'earlier files':>15}")
for arm, label in [("before", "base (before)"), ("dependency", "+ dependency-ordered files"),
                   ("shuffled", "+ shuffled files")]:
    r = order_result[arm]
    print(f"{label:<32}{r['later']:>12.4f}{r['earlier']:>15.4f}")
print(f"({order_result['before']['later_tokens']} later-file tokens, {order_result['before']['earlier_tokens']} earlier-file tokens)")
diff = order_result["difference"]
print(f"later files, shuffled - dependency: {diff:+.4f} nats/token "
      f"({'dependency order lower' if diff > 0 else 'shuffled order lower' if diff < 0 else 'equal'}); {time.time() - t0:.0f} s"
      + (" (read back from the course cache: the same base model, settings and seed)" if order_result["cached"] else ""))
_ = record("order_difference", round(diff, 4))
bench = bench_results.dependency_order_benchmark(info["fingerprint"])
if bench["status"] == "missing":
    print("no multi-seed result recorded: run", bench["command"])
else:
    n_seeds = len(bench["seeds"])
    se = bench["stdev_difference"] / n_seeds ** 0.5
    print(f"benchmarks/results/bench_dependency_order.json ({bench['date']}, seeds {bench['seeds']}"
          + ("" if bench["status"] == "ok" else f"; recorded on ANOTHER corpus {bench['corpus_fingerprint']}: rerun it")
          + f"): shuffled - dependency = {bench['mean_difference']:+.4f} ± {bench['stdev_difference']:.4f} "
          f"(mean ± sd), dependency order lower in {bench['positive']} of {n_seeds} seeds")
    effect = abs(bench["mean_difference"]) > 2 * se
    print(f"mean vs twice its standard error ({2 * se:.4f}): "
          + ("an effect larger than the seed-to-seed spread" if effect
             else "no effect larger than the seed-to-seed spread; this single run says nothing either way"))
    record("order_benchmark", {"mean": bench["mean_difference"], "sd": bench["stdev_difference"],
                               "seeds": n_seeds, "effect": bool(effect), "status": bench["status"]})

# %% [markdown] slideshow={"slide_type": "-"}
# **怎么读**：差值为正，说明按依赖顺序训练的模型在后面的文件上 loss 更低，与第03课的论断同向；为负则相反。
# 上面第一行是**一次**运行、一个种子；这么小的差值必须和种子之间的波动比较：第二行是 `benchmarks/bench_dependency_order.py`
# 用几个种子重复同一个实验后记下的均值和标准差（读自它写的结果文件），第三行是结论。
# 讲义 5.3 把"长序列、跨文件依赖"列为改进方向；在这个规模（每个文件 600 个字符、512 token 的上下文、40 步）上测不出依赖顺序的作用，
# 要看它就得用更长的上下文和大得多的模型——这正是讲义说的"探索更高效的拓扑排序和 Context 注入策略"。

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 小结
#
# - FIM 只改数据不改模型：两个均匀的**字符**切点 → prefix / middle / suffix → PSM 或 SPM（讲义的 `<SUF>s<PRE>p<MID>m`，或 StarCoder 训练代码的 `<PRE><SUF>s<MID>pm`），加 sentinel；
# - `fim_rate`（0.5）控制多少文档做 FIM，`spm_rate` 控制 PSM/SPM 的比例；context-level FIM 保证三段落在同一个训练窗口里；
# - label mask 决定"算哪些 loss"（L_FIM 只算 middle），attention mask 决定"能看到谁"，PSM/SPM 不需要改 attention（prefix-LM 变体才需要）；
# - context-level FIM 放不下 sentinel 的片段保持原样，middle 永远完整；
# - 目标：CLM 是 $-\sum_t \log P(x_t \mid x_{<t})$，FIM 学 $P(\text{Middle} \mid \text{Prefix}, \text{Suffix})$，L_FIM 只在 middle 上求和；
# - 这个 2.4M 参数的模型补不出整行代码；短 middle 上 FIM 帮没帮上忙，看本次运行和多种子记录（`bench_fim_probe.json`）；
# - 预训练数据就是第 01–03 课的语料，一个仓库一条依赖顺序的样本，held-out 按整个仓库留出；依赖顺序 vs 打乱顺序：单次运行要和多个种子的结果（`benchmarks/results/`）一起看；
# - 课程的小模型就是这里的 `base`：`tinymodel.get_tiny_model("base")` 返回标准的 Hugging Face 文件夹，第 05 课在它上面做 SFT（ChatML，`template: qwen`）。
