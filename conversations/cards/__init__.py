"""Lark card renderers (card JSON 2.0), one module per kind (conv owns this package)."""
