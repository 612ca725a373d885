from course_lib.training.tinymodel import main

raise SystemExit(main())
