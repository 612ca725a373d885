"""The course's own tooling (lesson 00): the notebook runner (``runner``), slides (``slides``), lesson
sources and student notebooks (``nbtools``), notebook records (``records``), the environment report
(``envcheck``), the command line (``cli``), the course map (``coursemap``), line counts
(``codestats``)."""
