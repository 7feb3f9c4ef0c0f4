"""What every layer of tracejit may use and which imports nothing else of tracejit:
diagnostics (`log`, `diagnostics`, `errors`), numpy's floating-point warnings off inside
ops (`float_errors`), size expressions (`symbolic`), what the environment sets (`config`)."""
