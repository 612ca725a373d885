"""The drill's cache folder names the settings a run differs in (config.default_root), so a run at other
settings — the test suite's smaller drill, another seed, another teacher or language — never replaces the models
of the profile's own run, and the CLI, lesson 07 and lessons 10/11 find the same folder from the same settings."""
from __future__ import annotations

from course_lib.drill import config
from course_lib.drill.command import build_parser, config_from_args
from course_lib.paths import cache_dir


def test_the_profiles_own_run_keeps_its_folder_and_other_settings_get_their_own():
    ci = config.resolve_profile("ci")
    own = config.default_root(ci)
    assert own == cache_dir("drill", "ci")
    # the profile's own values name the same folder as None
    assert config.default_root(ci, seed=ci.seed, eval_size=ci.drill.eval_size,
                               sft_steps=ci.drill.sft_overrides["max_steps"]) == own
    assert config.default_root(ci, seed=1).name == "ci-seed1"
    assert config.default_root(ci, eval_size=200, sft_steps=400).name == "ci-eval200-sft400"
    assert config.default_root(ci, "noisy-rules", seed=2).name == "ci-seed2-teacher-noisy-rules"
    assert config.default_root(ci, language="cpp", seed=1).name == "ci-cpp-seed1"


def test_the_notebooks_and_the_cli_find_the_same_folder():
    ci = config.resolve_profile("ci")
    for argv, kwargs in (([], {}), (["--seed", "1"], {"seed": 1}),
                         (["--eval-size", "200", "--sft-steps", "400"], {"eval_size": 200, "sft_steps": 400})):
        from_cli = config_from_args(build_parser().parse_args(["--profile", "ci", "--no-rl", *argv]))
        from_lesson = config.config_from_profile(ci, **kwargs)
        assert from_cli.paths.model_dir == from_lesson.paths.model_dir, argv
    assert config.config_from_profile(ci).paths.model_dir == config.default_root(ci) / "models"
    assert config.config_from_profile(ci, seed=1, eval_size=200, sft_steps=400).paths.model_dir.parent.name == \
        "ci-seed1-eval200-sft400"
