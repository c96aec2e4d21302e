"""Model configurations (see DESIGN.md)."""

__all__: list[str] = []
