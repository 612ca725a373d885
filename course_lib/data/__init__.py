"""Lessons 01–03, the code corpus: repository selection (``repos``, ``github``), file filters and
licences (``filters``), secret and PII redaction (``redaction``), the corpus (``corpus``), exact and
near-duplicate removal (``dedup``, ``dedup_scaleout``), dependency order (``deps``); the C/C++ lexer the
``language="cpp"`` variants of these share (``clike``)."""
