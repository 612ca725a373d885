"""Scripts that course_lib.training starts as subprocesses with another interpreter (the TRL environment)."""
