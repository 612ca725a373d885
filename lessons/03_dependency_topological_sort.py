# %% [markdown] slideshow={"slide_type": "slide"}
# # 第03课 依赖解析与拓扑排序：按依赖顺序拼接仓库
#
# DeepSeek-Coder、Qwen2.5-Coder 把**整个仓库**拼成一条训练样本：被依赖的文件在前，依赖它的文件在后，
# 模型读到 `from .models import Request` 时已经见过 `models.py`。本课在去重后的语料和真实的已安装包上做这件事。
#
# **学习目标**
# 1. 看清"一条正则解析 import"错在哪里：相对导入、`from . import x`、`import a.b as c`、`try`/函数里/`if TYPE_CHECKING` 下的导入、字符串和注释。
# 2. 用 AST 解析 + 仓库内模块解析（包、`__init__.py`、`src/` 布局）代替它；解析失败（Python 2 代码）时退回容错解析器并计数。
# 3. 用 networkx 建依赖图，确定性地拓扑排序；处理循环依赖：SCC 缩点 vs DeepSeek-Coder 的"最小入度"规则，并在真实包上测量各策略遵守了多少条 import 边。
# 4. 把仓库拼成一条样本（文件路径开头，可选 `<|repo_name|>` / `<|file_sep|>`），交给第04课。

# %% slideshow={"slide_type": "skip"} tags=["parameters"]
PROFILE = "ci"
SEED = 0
DRAW_PACKAGE = "requests"     # an installed distribution whose import graph we draw
PACKAGES = ["requests", "jinja2", "click", "packaging", "urllib3", "tqdm", "httpx", "rich", "fsspec",
            "setuptools"]     # installed distributions we measure the orderings on

# %% slideshow={"slide_type": "skip"}
import ast
import warnings

import matplotlib.pyplot as plt
import networkx as nx
import pandas as pd

from course_lib import exercises, get_profile, record
from course_lib.data import deps
from course_lib.data.redaction import redact_secrets

P = get_profile(PROFILE)
print(P.summary().splitlines()[0])

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 1. 为什么要排序：讲义的例子
#
# 把一个仓库拼成一条序列训练，模型学的是整条序列的似然：
#
# $$P(\text{repo}) = \prod_i P(f_i \mid f_{<i}) = P(f_1)\,P(f_2 \mid f_1)\,P(f_3 \mid f_1, f_2)\cdots$$
#
# 如果 $f_2$ 依赖 $f_1$，先看到 $f_1$ 的定义，预测 $f_2$（$P(f_2 \mid f_1)$）就容易得多——"先看定义，再看使用"。
# 讲义的例子：`utils.py` 定义工具函数，`model.py` 导入 `utils`，`train.py` 导入 `model`，理想顺序是 `utils.py → model.py → train.py`。
#
# 讲义的实现是一条正则 `^(?:from|import)\s+(\w+)`（MULTILINE）取行首 `from`/`import` 后的第一个词，`{模块}.py` 在仓库里就连一条边，
# 再用 networkx 拓扑排序；有环时打印警告并**退回输入顺序**。`deps.lecture_parse_imports` / `deps.lecture_topological_sort_files`
# 是它的复述（返回值多一个"是否退回"的标记，代替讲义的 print），先照原样跑讲义的例子：

# %% slideshow={"slide_type": "subslide"}
LECTURE_FILES = {
    "train.py": "from model import MyModel\n...",
    "utils.py": "def help(): pass",
    "model.py": "import utils\nclass MyModel: pass",
}
lecture_order, fell_back = deps.lecture_topological_sort_files(LECTURE_FILES)
print("lecture's sort:", lecture_order, "| fell back to input order:", fell_back)
print("course's order_files:", deps.order_files(LECTURE_FILES))

# %% [markdown] slideshow={"slide_type": "subslide"}
# 一个环就让讲义的做法前功尽弃：`model.py` 和 `layers.py` 互相导入时，`nx.topological_sort` 抛 `NetworkXUnfeasible`，
# 整个仓库退回输入顺序——`train.py` 排在它依赖的所有文件之前，环外本来可以遵守的边也一起丢了。

# %% slideshow={"slide_type": "-"}
CYCLE_FILES = {
    "train.py": "from model import MyModel\n",
    "model.py": "import utils\nimport layers\nclass MyModel: pass\n",
    "layers.py": "import model\n",
    "utils.py": "def help(): pass\n",
}
cycle_order, cycle_fell_back = deps.lecture_topological_sort_files(CYCLE_FILES)
course_cycle_order = deps.order_files(CYCLE_FILES)
print("lecture's sort:", cycle_order, "| fell back to input order:", cycle_fell_back)
print("course's order_files:", course_cycle_order)
g_cycle = deps.import_graph(CYCLE_FILES)
print("import edges respected — lecture:", deps.edge_respect(cycle_order, g_cycle)["all"],
      " course:", deps.edge_respect(course_cycle_order, g_cycle)["all"])
### BEGIN HIDDEN TESTS
assert lecture_order == ["utils.py", "model.py", "train.py"] and not fell_back
assert cycle_fell_back and cycle_order == list(CYCLE_FILES)
assert course_cycle_order.index("utils.py") < course_cycle_order.index("model.py") < course_cycle_order.index("train.py")
### END HIDDEN TESTS

# %% [markdown] slideshow={"slide_type": "subslide"}
# 讲义用一条正则解析 import、有环时退回输入顺序；本课用 AST 解析（第 2–3 节）并把环缩成一个点（第 5 节），因为正则读不懂相对导入、
# 缩进里的导入和字符串，而退回输入顺序会连环外的边一起放弃。
#
# ### 正则会踩的坑
#
# 下面这个文件把正则会踩的坑都放在一起。`deps.lecture_parse_imports` 是讲义的正则（`\w+`）；`deps.regex_imports` 是常见的变体
# （允许缩进，取 `\S+`），两者都错，错法不同。

# %% slideshow={"slide_type": "subslide"}
TRICKY = '''"""Module docs. Example:
import this_is_documentation
"""
import os, sys
import pkg.sub.mod as m
from . import sibling
from .helpers import util
from pkg.sub import y
try:
    import ujson as json
except ImportError:
    import json
from typing import TYPE_CHECKING
if TYPE_CHECKING:
    from pkg.types import Token
def lazy():
    import pkg.heavy
# import commented_out
SQL = """
import inside_a_string
"""
'''
print("lecture regex:", deps.lecture_parse_imports(TRICKY))
print("variant regex:", deps.regex_imports(TRICKY))

# %% [markdown] slideshow={"slide_type": "subslide"}
# 逐条看：
#
# 下表是变体正则（`\S+`）的结果；讲义的正则只认行首、且 `\w` 不含点号，所以**所有**相对导入和 `try`/函数里缩进的导入它都直接漏掉。
#
# | 写法 | 正则的结果 | 问题 |
# |---|---|---|
# | 文档字符串里的 `import this_is_documentation`、字符串里的 `import inside_a_string` | 当成导入 | 不知道自己在字符串里 |
# | `import os, sys` | 只有 `os,` → `os` | 丢了 `sys` |
# | `from . import sibling` | `.` | 不知道 `.` 是哪个包，也丢了 `sibling`（它可能是子模块） |
# | `from .helpers import util` | `.helpers` | 需要导入者所在的包才能解析 |
# | `try` 里的两个候选、函数里的延迟导入、`TYPE_CHECKING` 下的导入 | 和顶层导入无法区分 | 有的只在类型检查时存在 |
#
# （行首的 `# import ...` 注释这条正则恰好没匹配，但缩进的注释、`;` 后的导入一样会出错。）

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 2. AST 解析与容错解析
#
# `ast.parse` 之后遍历 `Import` / `ImportFrom` 节点：字符串和注释天然被排除，`level` 告诉我们相对导入有几个点，
# 遍历时记下导入所在的上下文（top / try / function / class / type_checking / if）。

# %% slideshow={"slide_type": "subslide"}
refs = deps.ast_imports(TRICKY)
pd.DataFrame([{"written": r.written(), "names": ", ".join(r.names), "line": r.lineno, "context": r.context}
              for r in refs])

# %% [markdown] slideshow={"slide_type": "subslide"}
# ### Python 2 文件：容错解析器
#
# 真实的 site-packages 里仍有 Python 2 语法的文件（`print "x"`、`exec "..."`）。`ast.parse` 会抛
# `SyntaxError`；`deps.parse_imports` 这时改用 `tokenize` 逐个逻辑行找 `import` / `from`（字符串和注释 token
# 直接跳过），再不行才按行扫描。用哪个解析器会被**计数**，不静默。

# %% slideshow={"slide_type": "-"}
PY2 = 'import os, sys\nprint "hello"\nfrom .compat import urlparse\ndef f():\n    import cPickle as pickle\n    exec "x = 1"\n'
try:
    ast.parse(PY2)
except SyntaxError as exc:
    print("ast.parse:", type(exc).__name__, exc.msg, "line", exc.lineno)
refs, parser = deps.parse_imports(PY2)
print(parser, [r.written() for r in refs])


# %% [markdown] slideshow={"slide_type": "slide"}
# ## 3. 仓库内的模块解析（练习 1）
#
# 导入写的是**模块名**，排序需要的是**文件**。`deps.module_index` 给仓库里每个 `.py` 文件起模块名：
# 沿目录向上走，只要目录里有 `__init__.py` 就是包的一部分；第一个不是包的目录就是导入根（`src/`、仓库根、`Lib/`）。
#
# 相对导入要先变成绝对模块名：`pkg/sub/mod.py`（模块 `pkg.sub.mod`）里的 `from ..core import x`，
# 一个点 = 自己所在的包 `pkg.sub`，每多一个点上升一层，得到 `pkg.core`。`__init__.py` 所在的包就是它自己。
#
# **练习 1**：写 `my_relative_to_absolute(importer, is_package, level, module)`；点数超过顶层包时返回 `None`。

# %% slideshow={"slide_type": "subslide"}
def my_relative_to_absolute(importer, is_package, level, module):
    ### BEGIN SOLUTION
    if level <= 0:
        return module or None
    parts = importer.split(".")
    package = parts if is_package else parts[:-1]
    if level - 1 >= len(package):
        return None
    base = package[: len(package) - (level - 1)]
    return ".".join(base + ([module] if module else []))
    ### END SOLUTION


my_relative_to_absolute = exercises.check("03-1", my_relative_to_absolute)

# %% slideshow={"slide_type": "subslide"}
SRC_REPO = {
    "pyproject.toml": "[project]\nname = 'demo'\n",
    "src/demo/__init__.py": "from .api import get\n",
    "src/demo/api.py": "from .sessions import Session\nfrom . import utils\n",
    "src/demo/sessions.py": "from .adapters import Adapter\nfrom .utils import tidy\nimport requests\n",
    "src/demo/adapters.py": "from .utils import tidy\n",
    "src/demo/utils.py": "import os\n",
    "tests/test_api.py": "import demo.api\nfrom demo import get\n",
}
index = deps.module_index([p for p in SRC_REPO if p.endswith(".py")])
print(index)
for ref in deps.ast_imports(SRC_REPO["src/demo/api.py"]):
    print(f"{ref.written():>12} import {', '.join(ref.names):<10} -> {deps.resolve_import(ref, 'src/demo/api.py', index)}")

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 4. 依赖图：一个真实的包
#
# `deps.import_graph(files)`：每个文件一个节点，每条解析到仓库内文件的导入一条边 **依赖 → 导入者**
# （边上记着导入出现的上下文）。下面是一个已安装的真实包的图；同色节点属于同一个强连通分量（SCC），也就是一个导入环。

# %% slideshow={"slide_type": "subslide"}
# an installed package is raw code: redact it as lesson 01 redacted the corpus (authors' e-mails are in it)
pkg_files = {path: redact_secrets(text).text for path, text in deps.installed_package_files(DRAW_PACKAGE).items()}
stats = deps.ParseStats()
G = deps.import_graph(pkg_files, stats)
print(f"{DRAW_PACKAGE}: {stats.python_files} files, {stats.imports} imports "
      f"({stats.internal} inside the package, {stats.external} external), {G.number_of_edges()} edges, "
      f"parsed by ast {stats.parsed_ast}, tolerant {stats.parsed_tolerant}")
sccs = [c for c in nx.strongly_connected_components(G) if len(c) > 1]
print(f"import cycles (SCCs with > 1 file): {[sorted(c) for c in sccs]}")

color = {}
for k, c in enumerate(sccs):
    for n in c:
        color[n] = k + 1
order = deps.order_scc(G)
pos_rank = {n: i for i, n in enumerate(order)}
layout = nx.spring_layout(G, seed=SEED, k=1.2)
fig, ax = plt.subplots(figsize=(10, 7))
nx.draw_networkx_edges(G, layout, ax=ax, alpha=0.35, arrowsize=8, edge_color="0.4")
palette = ["tab:orange", "tab:red", "tab:purple", "tab:brown", "tab:pink", "tab:olive"]
nx.draw_networkx_nodes(G, layout, ax=ax, node_size=260,
                       node_color=[palette[(color[n] - 1) % len(palette)] if n in color else "tab:blue"
                                   for n in G.nodes])
nx.draw_networkx_labels(G, layout, ax=ax, font_size=7,
                        labels={n: f"{pos_rank[n]}:{n.split('/')[-1][:-3]}" for n in G.nodes})
ax.set_title(f"{DRAW_PACKAGE}: import graph (label = position in the dependency order : module; "
             f"non-blue = inside an import cycle)")
ax.axis("off")
plt.show()


# %% [markdown] slideshow={"slide_type": "slide"}
# ## 5. 拓扑排序与循环依赖
#
# - **alphabetical**：按文件名——基线。
# - **kahn_fallback**：Kahn 算法（就绪文件按名字取），遇到环卡住时，剩下的文件按名字排——"退回文件名顺序"。
# - **deepseek**：DeepSeek-Coder 的规则：每次取剩余文件中**入度最小**的（不要求为 0），所以环也能前进。
#   但它可能把一个文件放在环外的依赖之前：环里的文件入度至少为 1，环外一个只依赖该环的文件入度也可能是 1。
# - **scc**：把每个强连通分量缩成一个点，得到的 DAG 做拓扑排序（平局按分量里最小的文件名），分量内部用
#   DeepSeek 规则。**环外的每条边都被遵守**——`deps.order_files` 用的就是它。
#
# **练习 2**：写 DeepSeek 规则 `my_deepseek_order(G)`：每步取"(剩余入度, 文件名)"最小的文件（入度只数来自剩余文件、非自环的边）。

# %% slideshow={"slide_type": "subslide"}
def my_deepseek_order(G):
    ### BEGIN SOLUTION
    remaining = set(G.nodes)
    order = []
    while remaining:
        indeg = {n: sum(1 for p in G.predecessors(n) if p in remaining and p != n) for n in remaining}
        pick = min(remaining, key=lambda n: (indeg[n], n))
        order.append(pick)
        remaining.remove(pick)
    return order
    ### END SOLUTION


def graph(edges, extra=()):
    g = nx.DiGraph()
    g.add_nodes_from(extra)
    g.add_edges_from(edges)
    return g


my_deepseek_order = exercises.check("03-2", my_deepseek_order)
print(my_deepseek_order(graph([("a", "a"), ("c", "b")])))   # a self-loop is not a dependency

# %% slideshow={"slide_type": "subslide"}
for name, fn in deps.STRATEGIES.items():
    o = fn(G)
    r = deps.edge_respect(o, G)
    print(f"{name:>14}: all {r['all']:.3f}  outside cycles {r['acyclic']:.3f}  inside cycles {r['cyclic']:.3f}  "
          f"({r['edges']} edges, {r['cyclic_edges']} in cycles)")

# %% [markdown] slideshow={"slide_type": "subslide"}
# ### 在真实包上测量
#
# `deps.compare_strategies` 对每个包、每种策略算出"依赖在前"的 import 边占比（全部边 / 环外的边 / 环内的边）。

# %% slideshow={"slide_type": "subslide"}
repos = {}
for name in PACKAGES:
    try:
        repos[name] = deps.installed_package_files(name)
    except ValueError as exc:
        print("skipped:", exc)
with warnings.catch_warnings(record=True) as caught:  # files too large for ast.parse: say which, briefly
    warnings.simplefilter("always", deps.LargeFileWarning)
    rows = pd.DataFrame(deps.compare_strategies(repos))
for w in caught:
    print(f"{w.category.__name__}: {w.message}")
table = rows.pivot_table(index="repo", columns="strategy", values="all").round(3)
table["edges"] = rows.groupby("repo")["edges"].first()
table["cyclic_edges"] = rows.groupby("repo")["cyclic_edges"].first()
print(table)
weighted = rows.assign(ok=rows["all"] * rows["edges"]).groupby("strategy")[["ok", "edges"]].sum()
share = (weighted["ok"] / weighted["edges"]).reindex(list(deps.STRATEGIES))
acyclic = rows.groupby("strategy")["acyclic"].min().reindex(list(deps.STRATEGIES))
print("\nshare of all import edges respected (all packages):", share.round(3).to_dict())
print("worst package, edges outside cycles:", acyclic.round(3).to_dict())
ax = share.plot.bar(figsize=(6, 3.5), ylim=(0, 1), rot=0, color=["0.6", "tab:orange", "tab:blue", "tab:green"])
ax.set_ylabel("share of import edges respected")
ax.set_title(f"{len(repos)} installed packages, {int(weighted['edges'].iloc[0])} edges")
plt.show()
record("edge_share", share.round(4).to_dict())
### BEGIN HIDDEN TESTS
assert share["scc"] >= share["deepseek"] > share["kahn_fallback"] > share["alphabetical"], share.to_dict()
### END HIDDEN TESTS
record("scc_acyclic_min", float(acyclic["scc"]));

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 6. 一个仓库 = 一条样本
#
# `deps.repo_to_sample(files, repo_name, markers=...)` 按 `order_files` 的顺序拼接：
#
# - 不带标记：每个文件前一行 `# path`（DeepSeek-Coder 的做法）；
# - `markers=True`：Qwen2.5-Coder 的仓库格式 `<|repo_name|>name\n<|file_sep|>path\ncontent\n<|file_sep|>...`，
#   第04课的 tokenizer 把这些标记当作特殊 token。

# %% slideshow={"slide_type": "subslide"}
print(deps.repo_to_sample({k: v for k, v in SRC_REPO.items() if k.endswith(".py")}, "demo"))
print("-" * 60)
sample = deps.repo_to_sample(pkg_files, DRAW_PACKAGE, markers=True)
print(sample[:600])
print(f"... {len(sample):,} characters, {sample.count('<|file_sep|>')} files")

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 7. 本课产物：按依赖排序的语料
#
# `deps.load_ordered_corpus(profile)` 读第02课的去重语料（`dedup.load_deduped_corpus`），按仓库分组，每个仓库
# 一行：依赖顺序的路径、带标记的样本文本、边数、遵守的边占比、用了容错解析器的文件。缓存在 `cache_dir("deps")`，
# 缺失时自动重建。第04课从这里取训练文本。

# %% slideshow={"slide_type": "-"}
ordered = deps.load_ordered_corpus(P)
print(ordered)
df = ordered.to_pandas()
tolerant = int(df["tolerant_files"].map(len).sum())
print(f"{len(df)} repositories, {int(df['n_files'].sum())} files, {int(df['edges'].sum())} import edges; "
      f"edges respected (edge-weighted) {(df['edges_respected'] * df['edges']).sum() / max(df['edges'].sum(), 1):.3f}; "
      f"files parsed by the tolerant parser: {tolerant}")
print(df.sort_values("edges", ascending=False)[["repo", "n_files", "edges", "edges_respected"]].head(8))
record("ordered_repos", len(df))
record("tolerant_files", tolerant);

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 小结
#
# - 顺序的理由：$P(\text{repo})=\prod_i P(f_i \mid f_{<i})$，被依赖的文件在前。讲义的正则 + networkx 在它的例子上给出 `utils.py → model.py → train.py`，但一个环就退回输入顺序。
# - 正则解析会读字符串、丢 `a, b`、不懂相对导入；AST 解析 + 上下文 + 容错回退（计数）才可靠。
# - 模块解析：`__init__.py` 决定包的边界，第一个非包目录是导入根（`src/` 布局自然成立）；相对导入按点数上升。
# - 拓扑排序要确定性（平局按名字）；有环时，SCC 缩点保证环外的边全部遵守，环内用 DeepSeek 的最小入度规则。
# - 在真实包上：scc ≥ deepseek > kahn_fallback > alphabetical（见上面的柱状图）。
# - 一个仓库拼成一条样本（路径 + 可选 `<|repo_name|>`/`<|file_sep|>`），第04课用它做 FIM 预训练。
