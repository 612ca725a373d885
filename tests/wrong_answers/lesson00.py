"""Plausible wrong answers to lesson 00's exercises."""


def count_all_lines(source):
    return len(source.splitlines())


def count_without_strip(source):  # an indented comment counts as code
    return sum(1 for line in source.splitlines() if line.strip() and not line.startswith("#"))


def count_newlines(source):  # misses a last line without "\n", counts blank lines
    return source.count("\n")


def count_hash_anywhere(source):  # drops lines with '#' anywhere, e.g. inline comments and strings
    return sum(1 for line in source.splitlines() if line.strip() and "#" not in line)


def profile_gpu_only(has_gpu, has_internet):
    return "full" if has_gpu else "ci"


def profile_either(has_gpu, has_internet):
    return "full" if (has_gpu or has_internet) else "ci"


def profile_internet_only(has_gpu, has_internet):
    return "full" if has_internet else "ci"


WRONG_ANSWERS = {
    "00-1": [count_all_lines, count_without_strip, count_newlines, count_hash_anywhere],
    "00-2": [profile_gpu_only, profile_either, profile_internet_only],
}
