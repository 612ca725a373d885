"""``tinymodel.with_seed``: another seed or another step budget is another cached pair (lesson 04)."""
import pytest

from course_lib.profiles import get_profile
from course_lib.training import tinymodel


def test_with_seed_and_train_steps_give_their_own_cache_folders():
    P = get_profile("ci")
    assert tinymodel.with_seed(P, P.seed) is P                    # nothing to change: the same profile
    seeded = tinymodel.with_seed(P, 1)
    short = tinymodel.with_seed(P, 1, train_steps=60)
    assert (seeded.seed, short.seed, short.tiny_model.train_steps) == (1, 1, 60)
    assert P.tiny_model.train_steps != 60 and seeded.tiny_model.train_steps == P.tiny_model.train_steps
    folders = {tinymodel.tiny_model_dir("base", p) for p in (P, seeded, short)}
    assert len(folders) == 3, "seed 0, seed 1 and the short seed-1 pair must not share a cache folder"
    assert tinymodel.with_seed(P, 0, train_steps=P.tiny_model.train_steps).tiny_model is P.tiny_model


def test_with_seed_rejects_a_step_budget_below_one():
    with pytest.raises(ValueError, match="positive number of steps"):
        tinymodel.with_seed(get_profile("ci"), 0, train_steps=0)
