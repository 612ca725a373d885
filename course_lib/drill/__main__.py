from course_lib.drill.command import main

raise SystemExit(main())
