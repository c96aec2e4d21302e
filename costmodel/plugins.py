"""Plug-ins into other tools' compilers: ``costmodel.torch_backend`` for ``torch.compile``.

A thin re-export, so that ``torch.compile(model, backend=costmodel.torch_backend("h100"))``
reads as the design card puts it; the backend lives with the other importers
(:mod:`graphs.importers.torch_compile`). Like the command line, this module sits above the
graphs package in the layer contracts.
"""

from __future__ import annotations

from graphs.importers.torch_compile import CapturedGraph, CompileReport, graph_breaks, torch_backend

__all__ = ["torch_backend", "CompileReport", "CapturedGraph", "graph_breaks"]
