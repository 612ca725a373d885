from course_lib.tooling.cli import main

raise SystemExit(main())
