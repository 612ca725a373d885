"""What the tiny model is used to measure: copying from context, and lesson 03's dependency-order claim.

:func:`repeat_copy_loss` (lesson 07: can a model copy from its context?) and
:func:`dependency_order_experiment` (lesson 04: continue pretraining ``base`` on dependency-ordered vs
shuffled files, compare the loss on the later files of held-out repositories).

Introduced in lesson 04.
"""
from __future__ import annotations

import random
from pathlib import Path
from typing import Any, Sequence

from course_lib.profiles import ProfileLike, resolve_profile
from course_lib.training.tinymodel import pretraining_data
from course_lib.training.tinymodel.model import get_tiny_model, pack_windows, pretrain, seeded
from course_lib.training.tinymodel.pretraining_data import RepoFiles, head_of
from course_lib.training.tinymodel.tokenizer import EOT, QWEN_FIM


def repeat_copy_loss(model_dir: str | Path, *, sequences: int = 8, length: int = 40, seed: int = 0) -> dict[str, float]:
    """Can the model copy? Random token sequences, each shown twice in a row: the mean loss (nats/token)
    on the first copy and on the second. A model that copies from its context (the "induction heads"
    of Olsson et al., 2022) has a much lower loss on the second copy; one that cannot has the same loss
    on both. Copying is what a model needs to reuse a function or argument name from its prompt.
    Introduced in lesson 07."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(model_dir)).eval()
    vocab = int(model.config.vocab_size)
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(min(100, vocab // 4), vocab, (sequences, length), generator=g)
    ids = torch.cat([x, x], dim=1)
    with torch.no_grad():
        logp = torch.log_softmax(model(ids).logits[:, :-1].float(), dim=-1)
    nll = -logp.gather(-1, ids[:, 1:, None])[..., 0]
    return {"first copy": round(float(nll[:, : length - 1].mean()), 3),
            "second copy": round(float(nll[:, length:].mean()), 3)}


# --- lesson 03's claim: dependency order vs shuffled order ----------------------------------------

def repo_token_stream(repo: RepoFiles, tok, order: Sequence[int] | None = None,
                      file_chars: int | None = None) -> tuple[list[int], list[int]]:
    """Token ids of ``repo`` as one sample (:meth:`RepoFiles.sample` with the files in ``order``,
    default dependency order, each cut to ``file_chars``) and, per token, the dependency-order index
    of the file it belongs to (-1 for the ``<|repo_name|>`` header). ``tok`` is a
    ``tokenizers.Tokenizer``. Introduced in lesson 04."""
    ids = tok.encode(f"{QWEN_FIM[4]}{repo.name}\n").ids
    owner = [-1] * len(ids)
    for i in (range(len(repo.paths)) if order is None else order):
        piece = f"{QWEN_FIM[5]}{repo.paths[i]}\n{head_of(repo.texts[i], file_chars).rstrip(chr(10))}\n"
        enc = tok.encode(piece).ids
        ids += enc
        owner += [i] * len(enc)
    return ids, owner


def later_files_loss(model, tok, repos: Sequence[RepoFiles], seq_len: int,
                     file_chars: int | None = None) -> dict[str, float]:
    """Mean token loss of ``model`` on held-out repositories read in dependency order: the first
    ``seq_len`` tokens of each repository (:func:`repo_token_stream`); of the files that start in that
    window, the loss on the later half (``later``: the P(f_i | f_<i) terms with the most context from
    the same repository) and on the earlier half (``earlier``). Introduced in lesson 04."""
    import torch
    import torch.nn.functional as F

    sums = {"later": [0.0, 0], "earlier": [0.0, 0]}
    model.eval()
    with torch.no_grad():
        for repo in repos:
            ids, owner = repo_token_stream(repo, tok, file_chars=file_chars)
            ids, owner = ids[:seq_len], owner[:seq_len]
            present = sorted({o for o in owner if o >= 0})
            if len(present) < 2:
                continue
            later = set(present[(len(present) + 1) // 2:])
            x = torch.tensor([ids], dtype=torch.long, device=model.device)
            logits = model(input_ids=x).logits[0, :-1].float()
            losses = F.cross_entropy(logits, x[0, 1:], reduction="none").tolist()
            for t, loss in enumerate(losses, start=1):
                if owner[t] >= 0:
                    part = sums["later" if owner[t] in later else "earlier"]
                    part[0] += loss
                    part[1] += 1
    model.train()
    out: dict[str, float] = {k: v[0] / v[1] if v[1] else float("nan") for k, v in sums.items()}
    out.update(later_tokens=sums["later"][1], earlier_tokens=sums["earlier"][1])
    return out


def order_experiment(model, tok, train_repos: Sequence[RepoFiles], eval_repos: Sequence[RepoFiles], *,
                     steps: int, batch_size: int, seq_len: int, file_chars: int | None,
                     learning_rate: float, seed: int = 0, progress: bool = False) -> dict[str, Any]:
    """Continue training copies of ``model`` for ``steps`` steps on ``train_repos`` read in two
    orders — each repository's files in dependency order, or shuffled within the repository (seeded) —
    with the same files, step budget and seed otherwise; then measure :func:`later_files_loss` on
    ``eval_repos`` (read in dependency order) before and after. ``difference`` is shuffled minus
    dependency on the later files: positive when dependency order helps. Introduced in lesson 04."""
    import copy

    eot_id = tok.token_to_id(EOT)
    result: dict[str, Any] = {"steps": steps, "batch_size": batch_size, "seq_len": seq_len,
                              "file_chars": file_chars, "seed": seed, "train_repos": len(train_repos),
                              "eval_repos": len(eval_repos),
                              "before": later_files_loss(model, tok, eval_repos, seq_len, file_chars)}
    for arm in ("dependency", "shuffled"):
        rng = random.Random(seed)
        docs = []
        for repo in train_repos:
            order = list(range(len(repo.paths)))
            if arm == "shuffled":
                rng.shuffle(order)
            docs.append(repo_token_stream(repo, tok, order, file_chars)[0])
        windows = pack_windows(docs, seq_len, eot_id)
        if not windows:
            raise ValueError(f"the training repositories give no window of {seq_len} tokens")
        trained = copy.deepcopy(model)
        log = pretrain(trained, tok, windows, fim_rate=0.0, steps=steps, batch_size=batch_size,
                       learning_rate=learning_rate, warmup_steps=max(1, steps // 10), seed=seed,
                       progress=progress)
        result[arm] = {**later_files_loss(trained, tok, eval_repos, seq_len, file_chars),
                       "windows": len(windows), "seconds": log["seconds"],
                       "final_train_loss": log["train_loss"][-1]}
    result["difference"] = result["shuffled"]["later"] - result["dependency"]["later"]
    return result


def dependency_order_experiment(profile: ProfileLike = "ci", *, seed: int | None = None,
                                progress: bool = False, cache: bool = True) -> dict[str, Any]:
    """Lesson 03's claim, P(repo) = prod_i P(f_i | f_<i), on the course's tiny model: continue
    pretraining the ``base`` model (:func:`get_tiny_model`) on the training repositories in dependency
    order vs shuffled order (:func:`order_experiment`, settings from the profile's ``dependency_order``
    section) and compare the loss on the later files of the first ``eval_repos`` held-out
    repositories that have two files or more. ``seed`` (default: the profile's) picks the shuffles
    and the window order. The result is cached (``cache=True``) in the course cache under the base
    model's folder name (its key), the ``dependency_order`` settings and the seed, so a re-run of the
    lesson reads it back; ``"cached"`` in the result says which happened. Introduced in lesson 04."""
    import json

    import torch
    from tokenizers import Tokenizer
    from transformers import AutoModelForCausalLM

    from course_lib import store

    P = resolve_profile(profile)
    S = P.dependency_order
    seed = P.seed if seed is None else seed
    path = get_tiny_model("base", P)
    settings = {"model": path.name, "settings": dict(S), "seed": seed}

    def build(folder: Path) -> dict[str, Any]:
        corpus = pretraining_data.pretraining_corpus(P)
        tok = Tokenizer.from_file(str(path / "tokenizer.json"))
        eval_repos = [r for r in corpus.held_out if len(r.paths) >= 2][: S.eval_repos]
        with seeded(seed):
            model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
            result = order_experiment(model, tok, corpus.train, eval_repos, steps=S.steps,
                                      batch_size=S.batch_size, seq_len=S.seq_len, file_chars=S.file_chars,
                                      learning_rate=S.learning_rate, seed=seed, progress=progress)
        store.atomic_write_text(folder / "result.json", json.dumps(result, default=float))
        return {"seed": seed}

    art = store.get_or_build("experiments", "dependency-order", settings, build, rebuild=not cache)
    result = json.loads((art.path / "result.json").read_text(encoding="utf-8"))
    return {**result, "cached": not art.built}
