"""Run a bench script against another checkout of Aeon (a ``git worktree`` of the commit to compare with).

    git worktree add /tmp/before <commit>
    python bench/checkout.py /tmp/before bench/verified/run.py --label before

``PYTHONPATH`` alone does not do it where Aeon is installed editable (``pip install -e .``): the editable
install's import finder comes before ``sys.path``, so the installed checkout's modules were imported whatever
``PYTHONPATH`` said. This drops that finder, puts the other checkout first, and runs the script as ``__main__``
(``SCRIPT`` is relative to that checkout). Entry points still come from the installed distribution's metadata;
they name modules, which now resolve in the other checkout.
"""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

#: source for ``python -c``: the same, for a child process whose ``PYTHONPATH`` names the checkout
CHECKOUT_FIRST = (
    "import sys; sys.meta_path[:] = [f for f in sys.meta_path if '__editable__' not in type(f).__module__]\n"
)


def main() -> None:
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    checkout = Path(sys.argv[1]).resolve()
    sys.meta_path[:] = [f for f in sys.meta_path if "__editable__" not in type(f).__module__]
    sys.path.insert(0, str(checkout))
    script = checkout / sys.argv[2]
    sys.argv = [str(script), *sys.argv[3:]]
    runpy.run_path(str(script), run_name="__main__")


if __name__ == "__main__":
    main()
