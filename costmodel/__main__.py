"""``python -m costmodel``: same as the ``costmodel`` command.

The command line sits above the engine (:mod:`graphs.cli`); the entry point loads it by name so
that nothing in the engine core imports the layers built on it.
"""

import importlib

raise SystemExit(importlib.import_module("graphs.cli").main())
