"""Kernel plans: what a fused region's kernel computes, as data a renderer per device
spells out (`backends/numba_cpu.py` for the CPU, `backends/cuda/kernels.py` for CUDA)."""
