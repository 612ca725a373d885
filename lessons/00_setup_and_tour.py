# %% [markdown] slideshow={"slide_type": "slide"}
# # 第00课 环境准备与课程导览 (Setup and tour)
#
# 第20课时「代码能力增强 (Code capability enhancement)」的第一个 notebook：先确认机器能跑这门课，再看一眼整条
# pipeline——从原始代码仓库 (raw repositories) 到一个经过沙箱评测 (sandbox evaluation) 的代码模型。

# %% [markdown] slideshow={"slide_type": "subslide"}
# **学习目标 (Learning goals)**
#
# 1. 用 `course_lib.tooling.envcheck` 检查环境：Python、关键 package 版本、GPU、sandbox backend、cache。
# 2. 理解两个 profile：`ci`（CPU、离线、几分钟）和 `full`（GPU、联网、真实规模）。
# 3. 认识课程地图：每一课负责 pipeline 的哪一步、产出什么 artefact。
# 4. 熟悉练习格式：写函数 → `exercises.check` 对照参考实现 → ✓ / ○ not done yet / ✗ 第一个不同的 case。

# %% slideshow={"slide_type": "skip"} tags=["parameters"]
PROFILE = "ci"   # "ci" (CPU, offline) or "full" (GPU + internet); papermill injects this
SEED = 0

# %% slideshow={"slide_type": "skip"}
import os
from pathlib import Path

import matplotlib.pyplot as plt

import course_lib
from course_lib import exercises, get_profile, record
from course_lib.tooling.envcheck import collect_environment, format_report
from course_lib.tooling.coursemap import COURSE_STAGES, draw_course_map
from course_lib.tooling.codestats import count_code_lines, line_stats

P = get_profile(PROFILE)
print(f"course_lib {course_lib.__version__}")
print(f"profile: {P.name}, checks: {os.environ.get('COURSE_CHECKS', 'normal')}")

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 1. 环境检查 (Environment check)
#
# `./course env`（或下面这个 cell）报告：
#
# - **Python**：课程要求 3.11；
# - **packages**：每个依赖的已安装版本是否满足 `pyproject.toml` 的要求（✓/✗）；
# - **GPU**：torch 能否看到 CUDA 设备——没有 GPU 就用 `ci` profile；
# - **sandbox backends**：第06课用来执行模型生成代码的隔离环境（bubblewrap / Docker）哪些可用；
# - **caches**：每一课把产出写进 course cache，后面的课直接读取（缺失时自动重建）。

# %% slideshow={"slide_type": "subslide"}
env = collect_environment()
print(format_report(env))

# %% slideshow={"slide_type": "skip"}
bad = [p["name"] for p in env["packages"] if not p["ok"] and not p["extra"]]
record("python_ok", env["python"]["ok"])
print("the course needs Python 3.11; this kernel runs", env["python"]["version"])
record("base_packages_missing_or_wrong", bad)
record("cuda_available", env["gpu"]["cuda_available"])
if bad:
    print("✗ these base packages do not satisfy pyproject.toml:", ", ".join(bad), "→ run ./course setup")
else:
    print("✓ every base dependency satisfies pyproject.toml")

# %% [markdown] slideshow={"slide_type": "fragment"}
# **怎么读这份报告**：✗ 的 package 用 `./course setup` 修复（它按 `pyproject.toml` 重新安装）；
# 没有 GPU 是正常的——`ci` profile 就是为 CPU 设计的；sandbox 一行告诉你第06课会用哪个 backend，
# 如果一个都没有，第06课会明确告诉你并停下，而不会悄悄在不隔离的进程里跑代码。

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 2. 两个 profile：`ci` 与 `full`
#
# 同一份代码、同一组函数，profile 只改变**规模、模型和 backend**。每个 notebook 的 `parameters` cell
# 只有 `PROFILE = "ci"`，其余设置都来自 `get_profile(PROFILE)`，按 `course_lib` 模块分节
# （`P.dedup.threshold`、`P.sft.base_model` ……）。
#
# | | `ci`（默认） | `full` |
# |---|---|---|
# | 硬件 | CPU，2 核，每课几分钟 | 一块 GPU |
# | 代码语料 | 本机的 Python 标准库 + site-packages（真实代码、真实 licence） | GitHub / The Stack（Hugging Face hub） |
# | 模型 | 课程自己在 CPU 上预训练的 tiny model（第04课，transformers） | Qwen2.5-0.5B-Instruct，大 teacher 模型 |
# | SFT | LLaMA-Factory（经 LazyLLM），在 CPU 上微调 tiny model | LLaMA-Factory（经 LazyLLM），在 GPU 上微调 Qwen2.5-0.5B-Instruct |
# | 推理 | vLLM 的 CPU 版（第07课）；第05课的前后对比用 transformers `generate` | vLLM |
# | sandbox | bubblewrap（有 Docker daemon 时第06课也演示 Docker） | Docker 镜像 `python-sandbox` |
#
# 下一格打印两个 profile 里决定这些行的设置（全部设置：`print(get_profile("ci").summary())`）。

# %% slideshow={"slide_type": "subslide"}
import pandas as pd

ci, full = get_profile("ci"), get_profile("full")
KEY_SETTINGS = [("corpus", "source"), ("tiny_model", "train_steps"), ("sft", "base_model"), ("sft", "finetuning_type"),
                ("sft", "max_steps"), ("sft", "launcher"), ("drill", "source"), ("drill", "train_size"),
                ("drill", "inference_backend"), ("drill", "inference_fallback"), ("sandbox", "backend")]
pd.DataFrame([{"section": sec, "setting": key, "ci": getattr(ci, sec)[key], "full": getattr(full, sec)[key]}
              for sec, key in KEY_SETTINGS]).set_index(["section", "setting"])

# %% [markdown] slideshow={"slide_type": "fragment"}
# `full` 需要：一块 CUDA GPU、能访问 Hugging Face hub（`nampdn-ai/tiny-codes` 是 gated 数据集，需要登录并接受条款）、
# `pip install -e .[full]`（vLLM、LLaMA-Factory 训练栈）、以及一个运行中的 Docker daemon。
# 缺任何一项时，相关 cell 会打印原因并跳过，不会伪造结果。

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 3. 课程地图 (Course map)
#
# 一条真实的代码大模型数据与训练 pipeline：原始仓库 → 过滤 (filters) → 去重 (dedup) → 依赖排序
# (dependency order) → FIM 预训练 → 指令数据与 SFT → sandbox 评测 → agentic RL → 执行反馈上的 RL (RL on execution feedback)，
# 最后把同一条 pipeline 搬到 C/C++ (beyond Python)。
# 每个方框标出负责它的课；箭头是课的先后顺序，"←" 是这一步真正从 cache 里读的东西（哪一课的 artefact，或外部数据），"→" 是它写出的 artefact。
# 数据是一条线流下来的：第04课的小模型就在第03课按依赖排好序的语料上预训练，第05课的指令数据也出自这份语料；
# 第06课的评测用 HumanEval，第07–09课从第04课的模型出发；第10课从第07课流水线 SFT 的模型出发，reward 来自 sandbox 里执行的隐藏测试；
# 第11课用第01–07课的同一批函数（多一个 `language="cpp"`）处理本机的 C/C++ 代码，并读取 C++ 演练的结果。

# %% slideshow={"slide_type": "subslide"}
ax = draw_course_map(highlight=None)
plt.show()

# %% slideshow={"slide_type": "skip"}
for stage in COURSE_STAGES:
    print(f"L{stage.lessons:<6} {stage.title:<30} ← {stage.reads:<32} → {stage.artefact}")
record("course_stages", len(COURSE_STAGES));
### BEGIN HIDDEN TESTS
reads = {stage.lessons: stage.reads for stage in COURSE_STAGES}
assert reads["04"].startswith("L03") and reads["05"].startswith("L03") and "L04" in reads["07"]
assert reads["10"].startswith("L07") and "L01" in reads["11"]
### END HIDDEN TESTS


# %% [markdown] slideshow={"slide_type": "fragment"}
# **每课都能单独运行**：如果前一课的 artefact 不在 cache 里，`course_lib` 会用同样的代码、同样的 seed 重建它。
# 所以你可以直接打开第04课，而不必先跑完 01–03。

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 4. 练习 1：数代码行 (count_code_lines)
#
# 先熟悉练习格式。写一个函数，返回 `source` 中**代码行**的数量：既不是空行、也不是只有 `#` 注释的行
# （docstring 算代码）。下一课的 file filters 会计算更多这样的 per-file 统计量。
#
# 下面的 check（`exercises.check("00-1", ...)`）会把你的函数和 `course_lib.tooling.codestats.count_code_lines` 在登记的 case 上对比：
#
# - ✓ 全部一致；
# - ○ *not done yet*：你还没写（`raise NotImplementedError`），notebook 用参考实现继续往下跑；
# - ✗ 打印第一个不一致的 case：input、expected、got。

# %% slideshow={"slide_type": "subslide"}
def count_code_lines(source: str) -> int:
    """Lines that are neither blank nor only a '#' comment."""
    ### BEGIN SOLUTION
    count = 0
    for line in source.splitlines():
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            count += 1
    return count
    ### END SOLUTION


# %% slideshow={"slide_type": "-"}
count_code_lines = exercises.check("00-1", count_code_lines)
### BEGIN HIDDEN TESTS
assert count_code_lines("a\n\tb\n#c\n") == 2
assert count_code_lines("    #!shebang-like\n") == 0
### END HIDDEN TESTS

# %% [markdown] slideshow={"slide_type": "fragment"}
# 用它看看几个真实的标准库模块：注释和空行占了多少？（第01课会用类似的统计量过滤掉 auto-generated
# 或异常的文件。）

# %% slideshow={"slide_type": "subslide"}
import importlib

modules = ["json", "textwrap", "heapq", "functools", "dataclasses"]
stats = {}
for name in modules:
    path = Path(importlib.import_module(name).__file__)
    text = path.read_text(encoding="utf-8")
    stats[name] = line_stats(text)
    assert stats[name].code == count_code_lines(text)

fig, ax = plt.subplots(figsize=(8, 3))
bottom = [0] * len(modules)
for kind, colour in (("code", "#2b5d8a"), ("comment", "#f0a35e"), ("blank", "#cccccc")):
    values = [getattr(stats[m], kind) for m in modules]
    ax.bar(modules, values, bottom=bottom, label=kind, color=colour)
    bottom = [b + v for b, v in zip(bottom, values)]
ax.set_ylabel("lines")
ax.set_title("Lines of a few standard-library modules")
ax.legend()
plt.show()
record("json_code_lines", stats["json"].code);


# %% [markdown] slideshow={"slide_type": "slide"}
# ## 5. 练习 2：该用哪个 profile？
#
# 写 `choose_profile(has_gpu, has_internet)`：只有**同时**有 GPU 和网络时返回 `"full"`，否则返回 `"ci"`。
# 参考实现是 `course_lib.profiles.recommend_profile`。

# %% slideshow={"slide_type": "subslide"}
def choose_profile(has_gpu: bool, has_internet: bool) -> str:
    """'full' needs a GPU and internet; anything else runs 'ci'."""
    ### BEGIN SOLUTION
    return "full" if (has_gpu and has_internet) else "ci"
    ### END SOLUTION


# %% slideshow={"slide_type": "-"}
choose_profile = exercises.check("00-2", choose_profile)
this_machine = choose_profile(env["gpu"]["cuda_available"], has_internet=False)
print(f"this machine (assuming no internet): {this_machine!r}")
record("suggested_profile", this_machine);

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 6. 怎么跑这门课 (How to run)
#
# | 谁 | 命令 | 做什么 |
# |---|---|---|
# | 学生 | `./course lab`（离线参数见 README「How students work」） | 打开学生版 notebook，完成练习 |
# | 讲师 | `./course run` | 用 papermill 依次执行所有 solution notebook，写 `build/executed/`、`build/slides/`，最后打印一张表 |
# | 讲师 | `./course test` | 整套 pytest：`course_lib` 单元测试 + notebook 回归 + slides |
# | 所有人 | `./course env` | 就是本课第1节的报告 |
#
# `./course run --only 02,03 --profile ci --timeout 300 --student` 这些选项可以组合使用。

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 小结 (Recap)
#
# - 环境检查告诉你能跑哪个 profile；缺什么，`./course setup` 补什么。
# - `ci` 与 `full` 共用同一套函数，只换规模、模型和 backend；notebook 只读 `PROFILE`。
# - 课程地图：01 仓库与过滤 → 02 去重 → 03 依赖排序 → 04 FIM 预训练 → 05 指令数据与 SFT →
#   06 sandbox 评测 → 07 drill → 08–09 agentic RL → 10 执行反馈上的 RL (RL on execution feedback)。
# - 练习格式：函数写在 `# YOUR CODE HERE` 处，`exercises.check` 给出 ✓ / ○ / ✗ 和第一个不同的 case。
#
# 下一课：**第01课 代码语料的收集与过滤**。
