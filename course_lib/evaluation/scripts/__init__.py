"""Scripts that course_lib.evaluation starts as subprocesses with another interpreter (the vLLM environment)."""
