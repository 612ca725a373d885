# %% [markdown] slideshow={"slide_type": "slide"}
# # 第02课 代码去重：精确去重、MinHash 与 LSH
#
# 代码语料里有大量重复：vendored 拷贝（`pip/_vendor/...`、库里内嵌的 `msgpack`）、只改了几行的编码表
# （`encodings/cp*.py`）、复制粘贴的工具函数。重复数据让模型"背"训练集、浪费算力、污染评测。
# 本课在第01课的语料上做两层去重，并测量它做得对不对。
#
# **学习目标**
# 1. 精确去重（exact dedup）：对空白归一化后的内容取哈希。
# 2. 近似去重（near dedup）：shingle、Jaccard 相似度，手写 MinHash（练习），再用 `course_lib` 的向量化 MinHash，与 `datasketch` 对照。
# 3. LSH 分桶（banding）：S 曲线 `1-(1-s^r)^b`，按假阳性/假阴性权重选 (b, r)，候选再验证。
# 4. union-find 聚类 + 保留规则（stars 最多 → 路径最短），对照精确 Jaccard 测精确率（precision）/召回率（recall）。
# 5. 横向扩展：同样四个阶段在 `datatrove` 里怎么跑，哪个 executor 把它带到集群。

# %% slideshow={"slide_type": "skip"} tags=["parameters"]
PROFILE = "ci"          # "ci": stdlib + site-packages corpus on CPU; "full": GitHub corpus
SEED = 0
N_SCRATCH_DOCS = 40     # documents for the slow from-scratch MinHash
DATATROVE = "auto"      # "auto": run datatrove if .venv-datatrove exists; "build": create it first; "skip"
DATATROVE_DOCS = 600    # documents sent to datatrove in this notebook (None = the whole corpus)

# %% slideshow={"slide_type": "skip"}
import random
import time

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from course_lib import exercises, get_profile, record
from course_lib.data import dedup, dedup_scaleout
from course_lib.tooling import environments
from course_lib.data.corpus import load_corpus

P = get_profile(PROFILE)
CFG = P.dedup
print(P.summary().splitlines()[0])
print("dedup settings:", dict(CFG))

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 1. 语料与精确去重
#
# 先取第01课的语料（`load_corpus` 会在缓存缺失时自动重建）。精确去重最便宜：把所有连续空白压成一个空格，
# 再取 SHA-256。只在缩进、空行上不同的两个文件哈希相同。

# %% slideshow={"slide_type": "-"}
corpus = load_corpus(P)
docs = list(corpus["content"])
repos, paths = list(corpus["repo"]), list(corpus["path"])
print(f"{len(docs)} files from {len(set(repos))} repositories, {sum(corpus['size']) / 1e6:.1f} MB")

a = "def f(x):\n    return x + 1\n"
b = "def  f(x):\n\n\treturn x + 1"
print(dedup.normalize_whitespace(b))
print(dedup.content_hash(a) == dedup.content_hash(b))

exact_groups = dedup.exact_duplicate_groups(docs)
print(f"{len(exact_groups)} groups of exact duplicates, {sum(len(g) - 1 for g in exact_groups)} redundant files")
for g in exact_groups[:5]:
    print("  ", [f"{repos[i]}:{paths[i]}" for i in g])

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 2. Shingle 与 Jaccard 相似度
#
# 近似重复的文件哈希完全不同。要比较"有多像"，把文件变成 **shingle 集合**，再算 Jaccard：
# $J(A,B)=|A\cap B|/|A\cup B|$。
#
# - **词 n-gram**（bigcode 的做法）：按 `[^A-Za-z_0-9]` 切词，取连续 5 个词；对代码的缩进、标点不敏感。
# - **字符 n-gram**：连续 n 个字符，对很短的文本也有用，但集合大得多。
#
# 讲义的伪代码用字符 5-gram（`text[i:i+k]`）、128 个哈希、16 个 band × 8 行、阈值 0.8；本课默认用词 5-gram，哈希数、分桶和阈值与讲义相同，因为词 shingle 对缩进和空格不敏感、集合小得多（bigcode 的做法），字符 shingle 仍可用 `shingle="char5"` 选。

# %% slideshow={"slide_type": "subslide"}
snippet = "for i in range(n):\n    total += values[i] * weight"
print(dedup.word_tokens(snippet))
print(sorted(dedup.word_shingles(snippet, 5))[:4])
print(sorted(dedup.char_shingles("total += 1", 5))[:4])

edited = snippet.replace("weight", "scale")
for kind in ("word5", "word3", "char5"):
    A, B = dedup.shingles(snippet, kind), dedup.shingles(edited, kind)
    print(f"{kind}: |A|={len(A):3d} |B|={len(B):3d}  J={dedup.jaccard(A, B):.3f}")

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 3. 手写 MinHash（练习 1）
#
# MinHash 的想法：对集合做一个随机排列 $h$，取最小值 $\min_{x\in A} h(x)$。两个集合的最小值相等的概率
# **正好是** $J(A,B)$。用 `num_perm` 个独立排列，"相等的位置占比"就是 $J$ 的无偏估计，标准差
# $\sqrt{J(1-J)/\text{num\_perm}}$。
#
# 课本排列：先把 shingle 变成整数 $x$ = `zlib.crc32(shingle.encode("utf-8"))`，再用
# $h_{a,b}(x) = (a x + b) \bmod (2^{61}-1)$。`dedup.minhash_params(num_perm, seed)` 给出 $(a,b)$ 列表。
#
# **练习 1**：写 `my_minhash(shingle_set, params)`，返回每个 $(a,b)$ 下的最小值列表；空集合返回 $2^{61}-1$。
# shingle 可能含中文等非 ASCII 字符：哈希的是它的 UTF-8 字节。

# %% slideshow={"slide_type": "subslide"}
import zlib

PRIME = (1 << 61) - 1


def my_minhash(shingle_set, params):
    ### BEGIN SOLUTION
    base = [zlib.crc32(s.encode("utf-8")) for s in shingle_set]
    return [min(((a * x + b) % PRIME for x in base), default=PRIME) for a, b in params]
    ### END SOLUTION


my_minhash = exercises.check("02-1", my_minhash)

# %% [markdown] slideshow={"slide_type": "subslide"}
# ### 讲义的伪代码，对应到本课
#
# 讲义用四步伪代码写 MinHash 去重；本课每一步都是一个能运行的函数：
#
# 1. `get_shingles(text, k=5)`（字符 5-gram）→ `dedup.char_shingles`；本课默认用词 5-gram `dedup.word_shingles`
# 2. `compute_minhash_signature(shingles, num_hashes=128)` → 练习 1 的 `my_minhash`；向量化版 `dedup.MinHasher`
# 3. `lsh_bucketing(signatures, bands=16, rows=8)` → `dedup.lsh_candidate_pairs`（第 4 节）
# 4. 同桶的候选对再算精确 Jaccard → `dedup.verify_pairs`（第 5 节）
#
# 讲义的 `hash_func(s, i)` 没有定义；本课取 $h_i(x) = (a_i x + b_i) \bmod (2^{61}-1)$，因为 MinHash 需要一族彼此独立的哈希函数，这是最简单的一族。

# %% [markdown] slideshow={"slide_type": "subslide"}
# ### 手写版、`course_lib` 与 `datasketch` 都估得准吗？
#
# 取若干真实文件，各做一份"改了一部分行"的拷贝，得到一批 Jaccard 分布在 0.3–1 之间的文件对。
# 每一对的估计误差近似正态、标准差 $\sigma=\sqrt{J(1-J)/128}$，所以**约 95%** 的点应落在 ±2σ 带里（不是全部）；
# 下面打印三种实现各有多少比例落在带里，以及速度之比。

# %% slideshow={"slide_type": "-"}
rng = random.Random(SEED)
sources = [i for i in range(len(docs)) if 2_000 < len(docs[i]) < 20_000]
sources = sorted(rng.sample(sources, N_SCRATCH_DOCS))
pairs_docs, pairs = dedup.plant_near_duplicates([docs[i] for i in sources], N_SCRATCH_DOCS, seed=SEED,
                                                max_edit_rate=0.8)   # pairs: (source, edited copy)
NUM_PERM = 128

params = dedup.minhash_params(NUM_PERM, seed=SEED)
t0 = time.process_time()
scratch = [my_minhash(dedup.word_shingles(d), params) for d in pairs_docs]
t_scratch = time.process_time() - t0

hasher = dedup.MinHasher(num_perm=NUM_PERM, seed=SEED)
t0 = time.process_time()
fast = hasher.signatures(pairs_docs)
t_fast = time.process_time() - t0

from datasketch import MinHash
t0 = time.process_time()
ds = []
for d in pairs_docs:
    m = MinHash(num_perm=NUM_PERM, seed=SEED + 1)
    m.update_batch([s.encode("utf-8") for s in dedup.word_shingles(d)])
    ds.append(m)
t_ds = time.process_time() - t0

rows = []
for i, j in pairs:
    exact = dedup.jaccard(dedup.word_shingles(pairs_docs[i]), dedup.word_shingles(pairs_docs[j]))
    rows.append({"exact": exact,
                 "scratch": np.mean(np.array(scratch[i]) == np.array(scratch[j])),
                 "course_lib": float(dedup.estimated_jaccard(fast[i], fast[j])),
                 "datasketch": ds[i].jaccard(ds[j])})
est = pd.DataFrame(rows)
n = len(pairs_docs)
print(f"docs per CPU-second: scratch {n / t_scratch:,.0f}   course_lib {n / max(t_fast, 1e-9):,.0f}   "
      f"datasketch {n / t_ds:,.0f}   -> course_lib / datasketch = {t_ds / max(t_fast, 1e-9):.1f}x "
      f"(on {n} documents; benchmarks/bench_dedup.py measures on 20,000)")
record("minhash_speedup_vs_datasketch", round(t_ds / max(t_fast, 1e-9), 2))
errors = {k: float((est[k] - est.exact).abs().max()) for k in ("scratch", "course_lib", "datasketch")}
print("max |estimate - exact|:", {k: round(v, 3) for k, v in errors.items()})
print(f"largest sigma with {NUM_PERM} permutations (J = 0.5): {np.sqrt(0.25 / NUM_PERM):.3f}")
record("minhash_max_abs_error", errors);

# %% slideshow={"slide_type": "subslide"}
s = np.linspace(0, 1, 200)
sd = np.sqrt(s * (1 - s) / NUM_PERM)
fig, ax = plt.subplots(figsize=(6, 4.5))
ax.fill_between(s, s - 2 * sd, s + 2 * sd, color="0.85", label="±2σ (128 perms)")
ax.plot(s, s, "k--", lw=0.8)
for name, marker in (("scratch", "o"), ("course_lib", "s"), ("datasketch", "^")):
    ax.scatter(est.exact, est[name], s=22, marker=marker, label=name, alpha=0.8)
ax.set_xlabel("exact Jaccard (word 5-grams)")
ax.set_ylabel("MinHash estimate")
ax.set_title("Three MinHash implementations vs exact Jaccard")
ax.legend()
plt.show()
inside = {k: float(((est[k] - est.exact).abs() <= 2 * np.sqrt(est.exact * (1 - est.exact) / NUM_PERM) + 1e-9).mean())
          for k in ("scratch", "course_lib", "datasketch")}
print("share of pairs inside ±2σ (about 0.95 expected):", {k: round(v, 3) for k, v in inside.items()})


# %% [markdown] slideshow={"slide_type": "subslide"}
# ### `course_lib` 的 MinHash 为什么快
#
# 手写版每个 shingle × 每个排列都是一次 Python 运算。`dedup.MinHasher` 把它变成 numpy 矩阵运算：
#
# 1. 一批文档拼成一个字节数组，按字节表找出词的起止，用**前缀和**一次算出所有词的哈希；
# 2. 相邻 5 个词哈希的多项式 = 5-gram 的哈希（一次数组运算，跨文档的窗口丢掉）；
# 3. 排列用 multiply-add-shift：$h_k(x) = ((a_k x + b_k) \bmod 2^{64}) \gg 32$，对一批 shingle 一次算出
#    `(num_perm, shingles)` 矩阵，`np.minimum.reduceat` 按文档取每行最小值。
#
# 重复的 shingle 不改变最小值，所以不必先建 `set`。上面打印了这个小样本上的速度；认真的基准见 `benchmarks/bench_dedup.py`（结果记在 `docs/dedup_deps.md`）。

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 4. LSH 分桶：S 曲线
#
# 两两比较签名是 $O(N^2)$。LSH 把 `num_perm` 个值切成 $b$ 个 band、每个 band $r$ 行；任一 band 完全相同
# 就成为**候选对**。相似度为 $s$ 的一对成为候选的概率：
#
# $$P(s) = 1 - (1 - s^r)^b$$
#
# $r$ 越大曲线越陡、越靠右；$b$ 越大越靠左。阈值附近的陡峭程度决定假阳性（FP）和假阴性（FN）。
#
# **练习 2**：写 `my_s_curve(s, bands, rows)`（`s` 可以是 numpy 数组）。

# %% slideshow={"slide_type": "subslide"}
def my_s_curve(s, bands, rows):
    ### BEGIN SOLUTION
    s = np.asarray(s, dtype=float)
    return 1.0 - (1.0 - s ** rows) ** bands
    ### END SOLUTION


my_s_curve = exercises.check("02-2", my_s_curve)

# %% slideshow={"slide_type": "subslide"}
s = np.linspace(0, 1, 400)
fig, ax = plt.subplots(figsize=(7, 4.5))
for b, r in [(32, 4), (16, 8), (12, 10), (9, 13), (4, 32)]:
    ax.plot(s, my_s_curve(s, b, r), label=f"b={b}, r={r}  (threshold≈{(1 / b) ** (1 / r):.2f})")
ax.axvline(CFG.threshold, color="k", ls=":", lw=1)
ax.set_xlabel("Jaccard similarity s")
ax.set_ylabel("P(candidate)")
ax.set_title("LSH S-curves, num_perm = 128")
ax.legend(fontsize=8)
plt.show()

# %% [markdown] slideshow={"slide_type": "subslide"}
# ### 按 FP/FN 权重选 (b, r)
#
# `dedup.choose_bands` 在 $b\cdot r \le$ `num_perm` 里找使 $w_{FP}\cdot\text{FP} + w_{FN}\cdot\text{FN}$ 最小的组合，
# FP = 阈值以下 S 曲线下的面积，FN = 阈值以上 $1-P(s)$ 的面积（与 datasketch 的定义相同，等权重时同样给出 (9, 13)）。
#
# 候选对之后还会**验证**（算精确 Jaccard），假阳性只多花一次检查，假阴性却是留下的重复——所以把
# $w_{FN}$ 调高：`course_lib` 默认 0.95，得到 (16, 8)。

# %% slideshow={"slide_type": "subslide"}
table = []
for w_fn in (0.5, 0.8, 0.9, 0.95, 0.99):
    b, r = dedup.choose_bands(CFG.threshold, CFG.num_perm, 1 - w_fn, w_fn)
    fp, fn = dedup.banding_errors(CFG.threshold, b, r)
    table.append({"w_FN": w_fn, "bands": b, "rows": r, "FP area": round(fp, 4), "FN area": round(fn, 4),
                  "P(cand | s=0.8)": round(float(dedup.s_curve(0.8, b, r)), 3),
                  "P(cand | s=0.6)": round(float(dedup.s_curve(0.6, b, r)), 3)})
pd.DataFrame(table)

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 5. 候选、验证、聚类与保留规则
#
# 在整个语料（精确去重之后）上：签名 → 候选对 → 用精确 Jaccard 验证 → union-find 连成簇 → 每簇保留一个文件。
#
# **保留规则**（Stack v2 的做法）：来自 stars 最多的仓库的那份；一样多时取路径最短的；再一样按 (repo, path)
# 字母序——确定性的。注意近似重复**不传递**：簇里两个文件可能只是通过第三个文件连在一起。

# %% slideshow={"slide_type": "subslide"}
exact_gone = {i for g in exact_groups for i in g[1:]}
survivors = [i for i in range(len(docs)) if i not in exact_gone]
sub_docs = [docs[i] for i in survivors]

t0 = time.process_time()
hasher = dedup.MinHasher(num_perm=CFG.num_perm, seed=SEED)
sig = hasher.signatures(sub_docs)
t_sig = time.process_time() - t0
b, r = dedup.choose_bands(CFG.threshold, CFG.num_perm, 1 - CFG.fn_weight, CFG.fn_weight)
cand = dedup.lsh_candidate_pairs(sig, b, r, skip=hasher.last_empty)
verified = dedup.verify_pairs(sub_docs, cand, CFG.threshold, verify="exact")
print(f"signatures for {len(sub_docs)} files in {t_sig:.1f} CPU-s; {b}x{r} banding -> {len(cand)} candidates, "
      f"{len(verified)} verified at J >= {CFG.threshold}")

near_pairs = [(survivors[i], survivors[j]) for i, j in verified]
clusters = dedup.clusters_from_pairs(len(docs), near_pairs)
stars = dedup.repo_stars(P) or {}
print(f"{len(clusters)} clusters, {sum(len(c) - 1 for c in clusters)} files to remove")
for c in clusters[:6]:
    keeper = dedup.choose_keeper(c, repos, paths, stars)
    print("cluster:")
    for i in c:
        star = stars.get(repos[i], 0) if isinstance(stars, dict) else 0
        print(f"   {'KEEP' if i == keeper else '    '} {repos[i]:>16}:{paths[i]:<40} stars={star}")

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 6. 做得对吗？对照精确 Jaccard 的精确率和召回率
#
# 先说清楚什么**不是**结果：本课的流水线用精确 Jaccard 验证每个候选，所以对照精确 Jaccard 的精确率**按构造就是 1**
# （低于阈值的候选都被验证步骤删掉了），它不说明任何问题；要测的是**召回率**（LSH 漏掉了多少真正的重复对），以及不验证或只用估计值
# 验证时的精确率。
#
# "真值"用 `dedup.exact_jaccard_pairs`：精确的相似度连接（prefix filtering：按 shingle 稀有度排序，
# $J\ge t$ 的两个集合必然在前 $|A|-\lceil t|A|\rceil+1$ 个 shingle 里有交集），不漏一对。
# 先看真实语料（第02课产物的报告里已经算好），再看一个**人工植入**的近似重复集：真实文件 + 编辑过的拷贝，
# 相似度密集地分布在阈值附近，是更难的考题。

# %% slideshow={"slide_type": "subslide"}
deduped = dedup.load_deduped_corpus(P)
report = dedup.load_dedup_report(P)
q = report["quality"]
print(f"real corpus: {report['input_files']} files -> kept {report['kept']}, removed "
      f"{report.get('exact_duplicate', 0)} exact + {report.get('near_duplicate', 0)} near duplicates")
print(f"near-duplicate pairs vs exact Jaccard: recall {q['recall']:.3f} ({q['true_positives']}/{q['truth']} true "
      f"pairs found); precision {q['precision']:.3f} — 1 by construction: every reported pair was verified "
      f"with exact Jaccard >= {CFG.threshold}")
record("real_precision", q["precision"])
record("real_recall", q["recall"])
record("dedup_kept", report["kept"])
record("dedup_removed", report["removed"])
pd.DataFrame(report["removed_files"])[["repo", "path", "reason", "duplicate_of_repo", "duplicate_of_path", "jaccard"]].head(12)

# %% slideshow={"slide_type": "subslide"}
rng = random.Random(SEED)
base_idx = sorted(rng.sample(survivors, min(CFG.bench_docs, len(survivors))))
planted_docs, planted = dedup.plant_near_duplicates([docs[i] for i in base_idx], CFG.bench_docs // 4,
                                                    seed=SEED, max_edit_rate=0.3)
truth = dedup.exact_jaccard_pairs(planted_docs, CFG.threshold)
print(f"planted set: {len(planted_docs)} files ({len(planted)} edited copies); {len(truth)} pairs with J >= {CFG.threshold}")

h = dedup.MinHasher(CFG.num_perm, seed=SEED)
psig = h.signatures(planted_docs)
results = {}
for label, (bb, rr, verify) in {
        "9x13, no verify (datasketch's banding)": (9, 13, None),
        f"{b}x{r} + estimated Jaccard": (b, r, "estimate"),
        f"{b}x{r} + exact Jaccard (course_lib)": (b, r, "exact")}.items():
    c = dedup.lsh_candidate_pairs(psig, bb, rr, skip=h.last_empty)
    found = dedup.verify_pairs(planted_docs, c, CFG.threshold, verify=verify, signatures=psig)
    results[label] = dedup.precision_recall(found, truth)

from datasketch import MinHashLSH
lsh = MinHashLSH(threshold=CFG.threshold, num_perm=CFG.num_perm)
ds_pairs = set()
for i, d in enumerate(planted_docs):
    m = MinHash(num_perm=CFG.num_perm)
    m.update_batch([s.encode() for s in dedup.word_shingles(d)])
    ds_pairs |= {(min(i, j), max(i, j)) for j in lsh.query(m)}
    lsh.insert(i, m)
results["datasketch MinHashLSH default"] = dedup.precision_recall(ds_pairs, truth)

pr = pd.DataFrame(results).T[["precision", "recall", "found", "truth"]]
print(pr)
ax = pr[["precision", "recall"]].astype(float).plot.barh(figsize=(8, 3.2), xlim=(0.5, 1.02))
ax.axvline(0.95, color="k", ls=":", lw=1)
ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0))   # outside the axes: it never covers a bar
ax.set_title(f"Planted near-duplicates, J >= {CFG.threshold}")
plt.tight_layout()
plt.show()
best = results[f"{b}x{r} + exact Jaccard (course_lib)"]
record("planted_precision", best["precision"])
record("planted_recall", best["recall"]);

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 7. 本课产物：去重后的语料
#
# `dedup.load_deduped_corpus(profile)` 就是上面的全流程（精确 → 近似 → 聚类 → 保留规则），结果缓存在
# `cache_dir("dedup")`，键是 `dedup` 配置 + 第01课语料的内容指纹；缺失时自动重建。第03课从这里读。
# `dedup.load_dedup_report(profile)` 给出每个被删文件的原因、它重复的是谁以及 Jaccard。

# %% slideshow={"slide_type": "-"}
print(deduped)
print("columns:", deduped.column_names)
print("keep rule:", report["keep_rule"], "| stars known:", report["stars_known"])

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 7b. 文件级 vs 仓库级去重
#
# 上面是**文件级**去重：一个文件和别处的文件重复，就把它删掉——它所在的仓库从此缺了一个文件，第03课按依赖拼接时，
# 导入它的文件就找不到定义了。DeepSeek-Coder 因此在**仓库级**去重：把一个仓库的文件拼成一条样本，对这些样本做同样的
# MinHash 近似去重，一个仓库要么整个保留、要么整个删除（典型的重复仓库是 fork 和整仓拷贝）。
# `dedup.partially_removed_repos` 数出文件级去重让多少仓库缺了文件；`dedup.repo_level_duplicates` 做仓库级去重。
# 真实语料里的仓库是互不相同的发行包，所以再植入一个"fork"（一个真实仓库的拷贝，改一个文件）看它被整个找出来。

# %% slideshow={"slide_type": "subslide"}
partial = dedup.partially_removed_repos(report["removed_files"], repos)
print(f"file-level dedup left {len(partial)} of {len(set(repos))} repositories incomplete, e.g.",
      dict(list(partial.items())[:5]))

fork_of = max(set(repos), key=lambda r: (2 <= repos.count(r) <= 12, repos.count(r), r))
fork_idx = [i for i, r in enumerate(repos) if r == fork_of]
fork_docs = [docs[i] for i in fork_idx]
fork_docs[0] = fork_docs[0] + "\n# patched in the fork\n"
with_fork = dedup.repo_level_duplicates(docs + fork_docs, repos + [f"{fork_of}-fork"] * len(fork_idx),
                                        paths + [paths[i] for i in fork_idx],
                                        threshold=CFG.threshold, num_perm=CFG.num_perm)
fork_pairs = [p for p in with_fork["pairs"] if f"{fork_of}-fork" in p[:2]]
real_pairs = [p for p in with_fork["pairs"] if f"{fork_of}-fork" not in p[:2]]
print(f"repository-level near duplicates among the real repositories: {len(real_pairs)} pairs {real_pairs[:5]}")
print(f"planted fork of {fork_of} ({len(fork_idx)} files): found as {fork_pairs}")
record("repos_left_incomplete", len(partial))
record("repo_level_pairs_real", len(real_pairs))
### BEGIN HIDDEN TESTS
assert fork_pairs and fork_pairs[0][2] >= CFG.threshold, f"the planted fork of {fork_of} was found as {fork_pairs}"
### END HIDDEN TESTS

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 8. 横向扩展：datatrove 的四个阶段
#
# 同样的流水线在 Hugging Face 的 `datatrove` 里是四个 `PipelineStep`：
#
# | 阶段 | datatrove | 本课 |
# |---|---|---|
# | 1 签名 | `MinhashDedupSignature`（每个输入分片一个 task） | `MinHasher.signatures` |
# | 2 分桶 | `MinhashDedupBuckets`（每个 bucket 一个 task） | `lsh_candidate_pairs` |
# | 3 聚类 | `MinhashDedupCluster`（1 个 task，union-find） | `clusters_from_pairs` |
# | 4 过滤 | `MinhashDedupFilter`（每个分片一个 task） | 保留规则 + `corpus.select` |
#
# `LocalPipelineExecutor` 在一台机器上用多进程跑；换成 `SlurmPipelineExecutor`（每个阶段一个 Slurm array job，
# `depends=` 串起来）或 `RayPipelineExecutor`（Ray 集群），阶段代码不变——这就是去 TB 级语料的路。
#
# datatrove 和课程的训练栈装不进同一个环境，所以它在自己的小环境 `.venv-datatrove` 里以子进程运行（`./course setup` 会建好；
# 为什么、怎么建、踩过的坑见 `docs/dedup_deps.md` 的 "datatrove scale-out"）。

# %% slideshow={"slide_type": "subslide"}
status = environments.status("datatrove")
if DATATROVE == "build" and not status["ready"]:
    environments.ensure("datatrove")
    status = environments.status("datatrove")
if DATATROVE == "skip" or not status["ready"]:
    print("datatrove section skipped:", status["reason"] if not status["ready"] else "DATATROVE = 'skip'")
    record("datatrove_ran", False)
else:
    # every file our pipeline clusters, plus random others up to DATATROVE_DOCS
    n_dt = len(docs) if DATATROVE_DOCS is None else min(DATATROVE_DOCS, len(docs))
    in_clusters = sorted({i for c in clusters + exact_groups for i in c})
    others = [i for i in range(len(docs)) if i not in set(in_clusters)]
    sample = sorted(in_clusters + random.Random(SEED).sample(others, max(0, n_dt - len(in_clusters))))
    dt = dedup_scaleout.run_datatrove_minhash([docs[i] for i in sample], tasks=2, workers=2)
    ours = dedup.deduplicate([docs[i] for i in sample], [repos[i] for i in sample], [paths[i] for i in sample],
                             stars=stars, threshold=CFG.threshold, num_perm=CFG.num_perm)
    cmp = dedup_scaleout.compare_removals(ours.clusters + ours.exact_groups, dt["clusters"],
                                          [x["index"] for x in ours.removed], dt["removed"])
    print(f"datatrove {dt['datatrove_version']} on {len(sample)} files: {dt['seconds']} s "
          f"(stages {dt['stage_seconds']}), config {dt['config']}")
    print(f"removed: datatrove {cmp['theirs_removed']}, course_lib {cmp['ours_removed']}, both {cmp['removed_both']}")
    print(f"in a duplicate cluster: both {cmp['clustered_both']}, only course_lib {len(cmp['clustered_only_ours'])}, "
          f"only datatrove {len(cmp['clustered_only_theirs'])}")
    sh = {i: dedup.word_shingles(docs[sample[i]]) for c in dt["clusters"] for i in c}
    only_dt = [(c[0], i) for c in dt["clusters"] for i in c[1:] if i in set(cmp["clustered_only_theirs"])]
    sims = [dedup.jaccard(sh[a], sh[b]) for a, b in only_dt[:50]]
    b_dt, r_dt = dt["config"]["num_buckets"], dt["config"]["hashes_per_bucket"]
    print(f"datatrove banding {b_dt} x {r_dt}: its S-curve rises at s = (1/b)^(1/r) = {(1 / b_dt) ** (1 / r_dt):.2f}; "
          f"no verification step")
    if sims:
        print(f"exact Jaccard of datatrove-only cluster members with their cluster's first file: "
              f"median {np.median(sims):.2f}, min {min(sims):.2f} ({len(sims)} members)")
        record("datatrove_only_jaccard_median", float(np.median(sims)))
        ### BEGIN HIDDEN TESTS
        assert np.median(sims) < (1 / b_dt) ** (1 / r_dt) < CFG.threshold, (np.median(sims), b_dt, r_dt, CFG.threshold)
        ### END HIDDEN TESTS
    record("datatrove_ran", True)
    record("datatrove_removed", cmp["theirs_removed"])

# %% [markdown] slideshow={"slide_type": "subslide"}
# 读上面打印的数字（没有 datatrove 环境时这一节被跳过，原因已打印）：datatrove 的分桶在 $(1/b)^{1/r}$ 处陡升，而且**不验证**候选；
# 它的簇又是候选对的传递闭包（A~B、B~C 就把 A、C 放进一簇），所以只被它聚进簇的文件，和簇首文件的精确 Jaccard 可以远低于
# S 曲线陡升的位置——上面打印的中位数和最小值就是实测。本课的流水线先精确去重、再把候选用精确 Jaccard 验证到 0.8。
# 两种取舍都有道理：关键是知道自己的 S 曲线、验证步骤和聚类方式在哪里。

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 小结
#
# - 精确去重：空白归一化 + SHA-256；近似去重：词 5-gram shingle + Jaccard。
# - MinHash：最小值相等的概率 = Jaccard；向量化（前缀和哈希 + 排列矩阵 + `reduceat`）比 datasketch 快（倍数见第 3 节打印的小样本和 `benchmarks/bench_dedup.py`），估计误差同样约 95% 落在 ±2σ 内。
# - LSH：$P(s)=1-(1-s^r)^b$；有验证步骤时把 FN 权重调高（128 个排列、阈值 0.8 → 16×8），再用精确 Jaccard 验证——精确率按构造为 1，要看的是召回率（上面打印的数值）。
# - 文件级 vs 仓库级：文件级去重会让仓库缺文件；DeepSeek-Coder 把整个仓库拼成一条样本再去重，仓库要么整个保留、要么整个删除。
# - union-find 聚类 + 确定性的保留规则（stars → 路径长度 → 字母序），每个被删文件都有记录。
# - 规模化：datatrove 的四个阶段与本课一一对应；Local → Slurm / Ray executor。
# - 下一课：在去重后的语料上解析 import，按依赖顺序拼接仓库。
