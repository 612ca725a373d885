"""Scripts that course_lib.rl starts as subprocesses with another interpreter (the TRL environment)."""
