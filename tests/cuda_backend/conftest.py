"""Runs on Numba's CUDA simulator (NUMBA_ENABLE_CUDASIM=1: `make test` sets it) or, with
TRACEJIT_CUDA_TESTS=1 and NUMBA_ENABLE_CUDASIM=0, on a GPU."""
from numba import cuda

assert cuda.is_available(), "no CUDA device: run with NUMBA_ENABLE_CUDASIM=1"
