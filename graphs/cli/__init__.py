"""The command line: one module per command group, each a thin layer over library calls.

``costmodel`` (no arguments) runs ``report``, the default analysis (:mod:`.main`). Groups:
``op``/``rules`` (:mod:`.op`), ``derive`` (:mod:`.derive`), ``hw`` (:mod:`.hw`),
``model`` (:mod:`.model`), ``ledger``/``prefill``/``decode``/``sweep``
(:mod:`.phases`), ``fusion`` (:mod:`.fusion`), ``serve`` (:mod:`.serve`), ``search``
(:mod:`.search`), ``simulate`` (:mod:`.simulate`), ``size`` (:mod:`.size`), ``probe``
(:mod:`.measure`), ``calibrate`` (:mod:`.calibrate`), ``plot`` (:mod:`.plot`), ``engines``
(:mod:`.engines`): the table ``_MODULES`` of :mod:`.main`.

A command's module is imported only when it runs or its ``--help`` is asked
(:data:`.main.COMMANDS`); ``build_parser()`` with no argument builds every command's options
(tests, the fuzz suite, docs).
"""

from .main import build_parser, main

__all__ = ["main", "build_parser"]
