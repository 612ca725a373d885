"""Scripts that course_lib starts as subprocesses in other environments."""
