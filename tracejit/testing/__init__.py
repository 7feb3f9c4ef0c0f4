"""Tools for checking tracejit against eager execution: the differential oracle, the random
program fuzzer (`python -m tracejit fuzz`) and the mutation check."""
