"""Runtime support: the on-disk kernel cache."""
