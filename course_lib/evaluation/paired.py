"""How sure is "A ahead of B"? Paired confidence intervals of a pass@1 difference.

Two models answer the same eval prompts; each prompt gives a pair of outcomes (passed or not). The
difference of their pass@1 is the mean of the per-prompt differences, and its uncertainty comes from
*which prompts* were drawn (and, with several training seeds, *which seeds*). Pairing matters: most
prompts are passed by both or by neither, so the paired interval is much narrower than two separate ones.

- :func:`paired_pass_difference` — the difference, a percentile bootstrap interval (over prompts; over seeds
  and prompts within each seed when several seeds exist), its standard error and an exact McNemar p-value.
  Deterministic for a given ``seed``.
- :func:`mcnemar_exact` — the exact two-sided McNemar test on the discordant pairs.
- :func:`difference_verdict` — the sentence a lesson or benchmark prints: "A ahead of B" only when the
  interval excludes 0, else "no measurable difference".

Introduced in lesson 07.
"""
from __future__ import annotations

from math import comb
from typing import Any, Sequence

import numpy as np

NO_DIFFERENCE = "no measurable difference"


def mcnemar_exact(a_only: int, b_only: int) -> float:
    """Exact two-sided McNemar p-value: ``a_only`` prompts passed by A alone, ``b_only`` by B alone; under
    "no difference" each discordant prompt is A's with probability 1/2, so the p-value is
    ``min(1, 2 · P(X <= min(a_only, b_only)))`` with X ~ Binomial(a_only + b_only, 1/2) (1.0 without a
    discordant prompt). Introduced in lesson 07."""
    if a_only < 0 or b_only < 0:
        raise ValueError(f"discordant counts must be >= 0, got {a_only} and {b_only}")
    n = a_only + b_only
    if n == 0:
        return 1.0
    k = min(a_only, b_only)
    tail = sum(comb(n, i) for i in range(k + 1)) / 2 ** n
    return min(1.0, 2 * tail)


def _as_seeds(x: Any, name: str) -> list[np.ndarray]:
    """One 1-D float array per seed: ``x`` is a sequence of outcomes (one seed) or of such sequences."""
    if len(x) == 0:
        raise ValueError(f"{name}: no outcomes")
    first = x[0]
    nested = isinstance(first, (list, tuple, np.ndarray)) and np.ndim(first) == 1
    seeds = [np.asarray(s, dtype=np.float64) for s in x] if nested else [np.asarray(x, dtype=np.float64)]
    for i, s in enumerate(seeds):
        if s.ndim != 1 or s.size == 0:
            raise ValueError(f"{name}: seed {i} is not a non-empty 1-D sequence of outcomes")
        if np.isnan(s).any():
            raise ValueError(f"{name}: seed {i} has a missing outcome (None/NaN); pair only prompts with tests")
    return seeds


def paired_pass_difference(a: Sequence, b: Sequence, *, confidence: float = 0.95, n_boot: int = 10_000,
                           seed: int = 0) -> dict[str, Any]:
    """``pass@1(A) − pass@1(B)`` on the same prompts, with a paired bootstrap interval and McNemar's test.

    ``a`` and ``b``: per-prompt outcomes (1/0 or True/False), paired by position — one sequence (one
    training seed) or a list of sequences (one per seed; a seed's prompts may differ from another's, but
    ``a[s]`` and ``b[s]`` are the same prompts in the same order). The difference is the mean over seeds of
    each seed's mean per-prompt difference. The interval is the percentile bootstrap: ``n_boot`` times,
    resample the seeds with replacement (when there are several) and, within each, the prompts with
    replacement; with 3 seeds the seed level is coarse, and the interval says so only by being wide.
    ``se``: the bootstrap standard deviation. ``p_mcnemar``: :func:`mcnemar_exact` on the discordant pairs
    of all seeds pooled (treats a prompt's seeds as independent pairs, an approximation with several seeds).
    Deterministic for a given ``seed``.

    Returns ``{"diff", "a", "b", "low", "high", "se", "confidence", "p_mcnemar", "a_only", "b_only",
    "prompts", "seeds", "n_boot", "excludes_zero"}``; ``prompts`` is the number of pairs of the first seed
    (the total over seeds when they differ is ``pairs``). Raises ``ValueError`` naming the seed when the
    shapes differ. Introduced in lesson 07."""
    sa, sb = _as_seeds(a, "a"), _as_seeds(b, "b")
    if len(sa) != len(sb):
        raise ValueError(f"a has {len(sa)} seeds, b has {len(sb)}: pair them seed by seed")
    for i, (x, y) in enumerate(zip(sa, sb)):
        if x.shape != y.shape:
            raise ValueError(f"seed {i}: a has {x.size} outcomes, b has {y.size}: pair the same prompts")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    rng = np.random.default_rng(seed)
    diffs = [x - y for x, y in zip(sa, sb)]
    n_seeds = len(diffs)
    point = float(np.mean([d.mean() for d in diffs]))
    # slot j of a replicate holds one drawn seed, whose prompts are resampled independently of every other slot
    boot_means = np.empty((n_seeds, n_seeds, n_boot))
    for s, d in enumerate(diffs):
        for j in range(n_seeds if n_seeds > 1 else 1):
            idx = rng.integers(0, d.size, size=(n_boot, d.size))
            boot_means[s, j] = d[idx].mean(axis=1)
    if n_seeds > 1:
        pick = rng.integers(0, n_seeds, size=(n_boot, n_seeds))
        reps = boot_means[pick, np.arange(n_seeds)[None, :], np.arange(n_boot)[:, None]].mean(axis=1)
    else:
        reps = boot_means[0, 0]
    alpha = (1 - confidence) / 2
    low, high = (float(v) for v in np.quantile(reps, [alpha, 1 - alpha]))
    a_only = int(sum(((x == 1) & (y == 0)).sum() for x, y in zip(sa, sb)))
    b_only = int(sum(((x == 0) & (y == 1)).sum() for x, y in zip(sa, sb)))
    return {"diff": point, "a": float(np.mean([x.mean() for x in sa])), "b": float(np.mean([y.mean() for y in sb])),
            "low": low, "high": high, "se": float(reps.std(ddof=1)), "confidence": confidence,
            "p_mcnemar": mcnemar_exact(a_only, b_only), "a_only": a_only, "b_only": b_only,
            "prompts": int(sa[0].size), "pairs": int(sum(x.size for x in sa)), "seeds": n_seeds, "n_boot": n_boot,
            "excludes_zero": bool(low > 0 or high < 0)}


def format_interval(res: dict[str, Any]) -> str:
    """``+0.084 (95 % paired CI +0.031 to +0.137, McNemar p = 0.002; 250 prompts × 3 seeds)``.
    Introduced in lesson 07."""
    where = f"{res['prompts']} prompts" + (f" × {res['seeds']} seeds" if res["seeds"] > 1 else "")
    return (f"{res['diff']:+.3f} ({res['confidence']:.0%} paired CI {res['low']:+.3f} to {res['high']:+.3f}, "
            f"McNemar p = {res['p_mcnemar']:.3g}; {where})").replace("%", " %", 1)


def difference_verdict(res: dict[str, Any], a_label: str, b_label: str) -> str:
    """The verdict of a :func:`paired_pass_difference`: "<A> ahead of <B>: <interval>" when the interval lies
    above 0, "<B> ahead of <A>: <interval>" when below (the difference still printed as A − B), else
    "no measurable difference between <A> and <B>: <interval>". Introduced in lesson 07."""
    text = format_interval(res)
    if res["low"] > 0:
        return f"{a_label} ahead of {b_label}: {a_label} − {b_label} {text}"
    if res["high"] < 0:
        return f"{b_label} ahead of {a_label}: {a_label} − {b_label} {text}"
    return f"{NO_DIFFERENCE} between {a_label} and {b_label}: {a_label} − {b_label} {text}"
