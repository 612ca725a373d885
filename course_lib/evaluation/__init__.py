"""Lesson 06, evaluation by execution: the sandbox (``sandbox``), rewards (``rewards``), pass@k
(``metrics``), HumanEval (``humaneval``)."""
