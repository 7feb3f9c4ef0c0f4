"""What every layer of tracejit may use and which imports nothing else of tracejit:
diagnostics (`log`)."""
