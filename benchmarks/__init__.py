"""Benchmarks, validation replays and the tables they generate (not part of the installed package).

Run a script from the repository root as a module, ``python -m benchmarks.<script>`` (for example
``python -m benchmarks.serving_accuracy --rows nim- --quick``); the shared code is imported as
packages (:mod:`benchmarks.replay`, :mod:`benchmarks.baselines`), never through ``sys.path``.
"""
