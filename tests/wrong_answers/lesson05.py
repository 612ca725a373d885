"""Plausible wrong answers to lesson 05's exercises."""


def labels_off_by_one(ids, prompt_len):
    return [-100 if i <= prompt_len else int(t) for i, t in enumerate(ids)]


def labels_masks_the_answer(ids, prompt_len):
    return [int(t) if i < prompt_len else -100 for i, t in enumerate(ids)]


def labels_zero_for_prompt(ids, prompt_len):
    return [0 if i < prompt_len else int(t) for i, t in enumerate(ids)]


def labels_drop_prompt(ids, prompt_len):
    return [int(t) for t in ids[prompt_len:]]


def rubric_bonus_coupled_to_defines(status, defines=False, documented=False, has_tests=False):
    """The tests bonus only when the code also defines something."""
    if status == "no code":
        return 0
    if status == "syntax_error":
        return 2
    if status in ("passed", "not run"):
        return 7 + int(defines) + int(documented) + int(defines and has_tests and status == "passed")
    if status == "failed" and has_tests:
        return 5
    return 4


def rubric_tests_bonus_without_running(status, defines=False, documented=False, has_tests=False):
    """The tests bonus also when the sandbox did not run them ("not run")."""
    if status == "no code":
        return 0
    if status == "syntax_error":
        return 2
    if status in ("passed", "not run"):
        return 7 + int(defines) + int(documented) + int(has_tests)
    if status == "failed" and has_tests:
        return 5
    return 4


def rubric_failed_without_tests_is_5(status, defines=False, documented=False, has_tests=False):
    if status == "no code":
        return 0
    if status == "syntax_error":
        return 2
    if status in ("passed", "not run"):
        return 7 + int(defines) + int(documented) + int(has_tests and status == "passed")
    if status == "failed":
        return 5
    return 4


def rubric_documented_needs_defines(status, defines=False, documented=False, has_tests=False):
    """The documentation bonus only counted for code that defines a function or class."""
    if status == "no code":
        return 0
    if status == "syntax_error":
        return 2
    if status in ("passed", "not run"):
        return 7 + int(defines) + int(defines and documented) + int(has_tests and status == "passed")
    if status == "failed" and has_tests:
        return 5
    return 4


def rubric_lists_three_crashes(status, defines=False, documented=False, has_tests=False):
    """Lists the crashes the text names (runtime error, timeout, memory) and treats the rest as clean
    runs: an output flood scores like working code."""
    if status == "no code":
        return 0
    if status == "syntax_error":
        return 2
    if status in ("runtime_error", "timeout", "memory_limit"):
        return 4
    if status == "failed":
        return 5 if has_tests else 4
    return 7 + int(defines) + int(documented) + int(has_tests and status == "passed")


def rubric_sandbox_error_is_not_run(status, defines=False, documented=False, has_tests=False):
    """A broken sandbox scored like 'no sandbox here' (compile only): unverified code clears the sieve."""
    if status == "no code":
        return 0
    if status == "syntax_error":
        return 2
    if status in ("passed", "not run", "sandbox_error"):
        return 7 + int(defines) + int(documented) + int(has_tests and status == "passed")
    if status == "failed" and has_tests:
        return 5
    return 4


def rubric_failed_is_a_crash(status, defines=False, documented=False, has_tests=False):
    """Failed tests scored like a crash (4), whether or not the row had tests."""
    if status == "no code":
        return 0
    if status == "syntax_error":
        return 2
    if status in ("passed", "not run"):
        return 7 + int(defines) + int(documented) + int(has_tests and status == "passed")
    return 4


WRONG_ANSWERS = {
    "05-1": [labels_off_by_one, labels_masks_the_answer, labels_zero_for_prompt, labels_drop_prompt],
    "05-2": [rubric_bonus_coupled_to_defines, rubric_tests_bonus_without_running,
             rubric_failed_without_tests_is_5, rubric_documented_needs_defines, rubric_lists_three_crashes,
             rubric_sandbox_error_is_not_run, rubric_failed_is_a_crash],
}
