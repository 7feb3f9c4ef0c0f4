"""The CUDA backend, on arrays of Numba's CUDA device (or its simulator):

- `kernels.py`: the kernel plans of codegen/plan.py spelled as CUDA kernels (elementwise,
  row and column kernels, matmul), the `cuda` backend's `compile_region`;
- `host.py`: host programs over device arrays (a traced graph's forward and backward);
- `eager.py`: one op on device arrays (a kernel, or a copy through the host), what eager
  dispatch and the host programs call;
- `indexing.py`: device kernels for broadcasting, gathers, scatters and views;
- `memory.py`: device allocations, counted for `tj.cuda.memory_allocated()`;
- `special.py`: the special functions of ops/special.py as device functions.

Importing the package imports none of them (nor Numba's CUDA); `eager.py` and `memory.py`
load with the eager runtime and import Numba's CUDA only with the first device array: the
eager runtime asks `memory` whether any exists before it looks further.
"""
