from course_lib.cli import main

raise SystemExit(main())
