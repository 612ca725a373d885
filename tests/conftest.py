"""Shared test setup: modest thread counts, the repository root, and executed-notebook records."""
from __future__ import annotations

import os

# Keep BLAS/torch from grabbing every core: tests run beside each other and beside notebook kernels.
for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("MPLBACKEND", "Agg")

from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def repo() -> Path:
    """The repository root."""
    return ROOT


@pytest.fixture(scope="session")
def notebook_records():
    """``notebook_records("04")`` → the values lesson 04's solution recorded with ``course_lib.record``
    (executes the notebook with the ci profile if the regression has not done so in this build)."""
    from tests.notebook_helpers import records_of

    return records_of
