"""course_lib — the shared helper package of the course "第20课时：代码能力增强".

Each lesson notebook imports what it needs from here. Modules are named after the concept they hold
(filters, dedup, deps, fim, sft, sandbox, metrics, drill, agentic, ...), and each public function's
docstring names the lesson that introduces it ("Introduced in lesson 02.").
"""
from course_lib.profiles import Profile, get_profile, PROFILES
from course_lib.checks import check_function, check_value, record
from course_lib.paths import repo_root, cache_dir, build_dir

__version__ = "0.1.0"

__all__ = [
    "Profile", "get_profile", "PROFILES", "check_function", "check_value", "record",
    "repo_root", "cache_dir", "build_dir", "__version__",
]
