"""Lesson 02's exercises: MinHash from scratch, the LSH S-curve."""
from __future__ import annotations

import numpy as np

from course_lib.data import dedup
from course_lib.exercises import Exercise

_SNIPPET = "for i in range(n):\n    total += values[i] * weight"
_PARAMS8 = dedup.minhash_params(8, seed=0)
_LONG = " ".join(f"token{i % 37} value{i % 11}" for i in range(300))

EXERCISES = [
    Exercise(
        id="02-1", name="MinHash from scratch", reference=dedup.textbook_minhash,
        cases=[({"a b c d e"}, _PARAMS8), (dedup.word_shingles(_SNIPPET), _PARAMS8), (set(), _PARAMS8),
               (dedup.word_shingles(_LONG), dedup.minhash_params(32, seed=1)),
               ({"x", "y"}, dedup.minhash_params(3, seed=7)),
               ({"计算 总和", "数值 for", "naïve café", "x"}, _PARAMS8)],      # non-ASCII: hash the UTF-8 bytes
        description="min over shingles of (a*crc32(utf-8 bytes of s) + b) mod (2^61 - 1) per (a, b); "
                    "2^61 - 1 for an empty set."),
    Exercise(
        id="02-2", name="S-curve", reference=dedup.s_curve,
        cases=[(0.8, 16, 8), (0.5, 9, 13), (np.linspace(0, 1, 11), 20, 5), (1.0, 1, 1), (0.0, 32, 4),
               (0.7, 4, 2)],
        description="P(candidate) = 1 - (1 - s^rows)^bands, for a number or a numpy array."),
]
