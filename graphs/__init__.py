"""Dataflow-graph builders and importers (see DESIGN.md)."""

__all__: list[str] = []
