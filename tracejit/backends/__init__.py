"""Backends that run IR graphs: `interpret` (numpy through the op table)."""
