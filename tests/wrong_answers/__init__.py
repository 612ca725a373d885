"""Plausible wrong answers to the course's exercises, one module per lesson (``lessonNN.py``), each
with ``WRONG_ANSWERS = {"NN-k": [fn, ...]}``: at least three per exercise. ``tests/test_exercises.py``
asserts that the exercise's check rejects every one of them, naming the failing case."""
