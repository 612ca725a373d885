"""The code passes ruff with the configuration in pyproject.toml ([tool.ruff])."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_ruff_is_clean():
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    assert ruff, "ruff is a dev dependency: run ./course setup"
    out = subprocess.run([ruff, "check", "--output-format", "concise", "."], cwd=ROOT, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, "ruff found problems (`ruff check --fix .` fixes some):\n" + out.stdout[-6000:]
