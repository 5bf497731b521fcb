"""``python -m tests.golden record [--regenerate] [pytest arguments]``: re-record the golden
fixtures of the database the environment names (SQLite, or PostgreSQL with ``DATABASE_URL``) by
running ``tests/test_golden.py`` through ``dev.py test`` with ``MURMUR_GOLDEN_RECORD=1``.
``--regenerate`` first draws new hypothesis sequences into ``tests/golden/sequences.json`` (then
record on both databases). Further arguments go to pytest (``-k orphans``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
COUNT = 30  # hypothesis sequences


def main(argv: list[str]) -> int:
    if not argv or argv[0] != "record":
        print(__doc__)
        return 2
    rest = argv[1:]
    if "--regenerate" in rest:
        rest.remove("--regenerate")
        from tests.golden import SEQUENCES, dump
        from tests.golden.generated import draw

        SEQUENCES.write_text(dump(draw(COUNT)))
    command = [sys.executable, str(ROOT / "dev.py"), "test", "tests/test_golden.py", *rest]
    env = {**os.environ, "MURMUR_GOLDEN_RECORD": "1"}
    return subprocess.run(command, cwd=ROOT, env=env).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
