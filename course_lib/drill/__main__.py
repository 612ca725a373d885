from course_lib.drill.cli import main

raise SystemExit(main())
