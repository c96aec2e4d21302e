"""``python -m costmodel``: same as the ``costmodel`` command."""

from .cli import main

raise SystemExit(main())
