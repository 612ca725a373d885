"""Scripts that course_lib.drill starts as subprocesses with another interpreter (the vLLM environment)."""
