"""Capture: turning a running program into guarded IR traces (`tj.trace`)."""
