"""The CUDA backend, on arrays of Numba's CUDA device (or its simulator):

- `kernels.py`: the kernel plans of codegen/plan.py spelled as CUDA kernels (elementwise,
  row and column kernels, matmul), the `cuda` backend's `compile_region`;
- `indexing.py`: device kernels for broadcasting, gathers, scatters and views;
- `memory.py`: device allocations, counted for `tj.cuda.memory_allocated()`;
- `special.py`: the special functions of ops/special.py as device functions.

Importing the package imports none of them (nor Numba's CUDA): the eager runtime asks
`memory` whether any device array exists before it looks further.
"""
