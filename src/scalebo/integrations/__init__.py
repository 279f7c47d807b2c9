"""Bridges to other tools (optional extras, imported lazily)."""
