"""Entry point of ``python -m bench``."""

from __future__ import annotations

from bench.runner import main

raise SystemExit(main())
