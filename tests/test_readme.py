"""The README's embedding example runs as written."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def test_embedding_example_runs() -> None:
    (code,) = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.DOTALL)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "README.md", "exec"), {})
    assert out.getvalue().splitlines() == ["1 plan None None", "2 step 1 complete", "completed {'words': 6}"]


def test_quick_start_is_two_commands_that_ci_uses() -> None:
    text = README.read_text(encoding="utf-8")
    blocks = re.findall(r"```bash\n(.*?)```", text, re.DOTALL)
    assert blocks[0].strip() == 'bash scripts/setup.sh && aeon run "calculate the sum of 5 and 10"'
    assert blocks[1].strip() == "bash scripts/setup.sh --dev && python3 -m pytest"
    ci = (README.parent / ".ci" / "run").read_text(encoding="utf-8")
    assert "bash scripts/setup.sh --dev" in ci and "python3 -m pytest" in ci
