"""Records: values a notebook writes into its own output so tests can read them back.

``record(name, value)`` displays ``{RECORD_MIME: {name: value}}`` beside a short text form;
:func:`course_lib.tooling.nbtools.read_records` reads every record of an executed notebook.

Introduced in lesson 00.
"""
from __future__ import annotations

import json
from typing import Any

RECORD_MIME = "application/vnd.course.record+json"


def _short(x: Any, limit: int) -> str:
    try:
        text = repr(x)
    except Exception:  # pragma: no cover - repr of exotic objects
        text = f"<{type(x).__name__}>"
    return text if len(text) <= limit else text[: limit - 20] + f"... ({len(text)} chars)"


def record(name: str, value: Any) -> Any:
    """Record a value in the notebook's output so tests can read it back from the executed notebook
    (``course_lib.tooling.nbtools.read_records``). Returns ``value``. Introduced in lesson 00."""
    try:
        payload = json.loads(json.dumps(value, default=float))
    except (TypeError, ValueError) as exc:
        raise TypeError(f"record({name!r}, ...) needs a JSON-serialisable value: {exc}") from None
    try:
        from IPython import get_ipython
        from IPython.display import display

        if get_ipython() is not None:
            display({RECORD_MIME: {name: payload}, "text/plain": f"{name} = {_short(value, 200)}"},
                    raw=True)
    except ImportError:  # pragma: no cover - IPython is a dependency
        pass
    return value
