"""Contractions and diagonals: `tj.einsum`, `tensordot`, `kron`, `cross`, `baddbmm`,
`addbmm`, `addmv`, `addr`, `diagonal`, `diag_embed`, `diag`, `diagflat`, `meshgrid`,
`tril_indices`, `triu_indices`.

All are compositions of permute, reshape, matmul, sum and basic indexing, so traces record
them and autograd differentiates them with no rules of their own.
"""
from __future__ import annotations

import builtins

import numpy as np

from ..core import dtypes as dt
from ..ops.rules import broadcast_shapes, normalize_dim
from . import functional as F
from .tensor import Tensor
from .creation import arange, tensor, zeros


def _prod(sizes) -> int:
    n = 1
    for s in sizes:
        n *= s
    return n


# ---- diagonals -----------------------------------------------------------------------------
def diagonal(input, offset=0, dim1=0, dim2=1):
    """The `offset`-th diagonal of the (dim1, dim2) planes, as the last dimension.

    >>> tj.diagonal(tj.arange(9).reshape(3, 3), 1)   # tensor([1, 5])
    """
    if input.ndim < 2:
        raise RuntimeError(f"diagonal(): expected a tensor of at least 2 dimensions, got "
                           f"{input.ndim}")
    d1, d2 = normalize_dim(dim1, input.ndim, "diagonal"), normalize_dim(dim2, input.ndim,
                                                                        "diagonal")
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    rest = [k for k in range(input.ndim) if k not in (d1, d2)]
    x = F.permute(input, *rest, d1, d2)
    rows, cols = x.shape[-2], x.shape[-1]
    r0, c0 = (0, offset) if offset >= 0 else (-offset, 0)
    n = builtins.max(0, builtins.min(rows - r0, cols - c0))
    x = F.narrow(F.narrow(x, -2, builtins.min(r0, rows), n), -1, builtins.min(c0, cols), n)
    flat = F.reshape(x, tuple(x.shape[:-2]) + (n * n,))
    return F.getitem_raw(flat, (Ellipsis, slice(None, None, n + 1)), ())


def diag_embed(input, offset=0, dim1=-2, dim2=-1):
    """Tensors whose (dim1, dim2) planes have input's last dimension on their `offset`-th
    diagonal and zeros elsewhere."""
    nd = input.ndim + 1
    d1, d2 = normalize_dim(dim1, nd, "diag_embed"), normalize_dim(dim2, nd, "diag_embed")
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    x = input if input.ndim else F.reshape(input, (1,))
    n = x.shape[-1]
    m = n + abs(offset)
    device = x.device.type
    if offset:
        x = F.cat([x, zeros(*x.shape[:-1], abs(offset), dtype=x.dtype, device=device)], -1)
    rows, cols = arange(m, device=device), arange(m, device=device)
    on = (cols - F.unsqueeze(rows, 1)) == offset
    values = F.unsqueeze(x, -1) if offset >= 0 else F.unsqueeze(x, -2)
    out = F.where(on, values, False if x.dtype is dt.bool_ else 0)
    perm, batch = [0] * nd, iter(range(nd - 2))
    for k in range(nd):
        perm[k] = nd - 2 if k == d1 else nd - 1 if k == d2 else next(batch)
    return F.permute(out, *perm)


def diag(input, diagonal=0):
    """A 1-d input made the `diagonal`-th diagonal of a square matrix, or a 2-d input's
    `diagonal`-th diagonal."""
    if input.ndim == 1:
        return diag_embed(input, diagonal)
    if input.ndim == 2:
        return F.clone(globals()["diagonal"](input, diagonal))
    raise RuntimeError(f"diag(): Supports 1D or 2D tensors. Got {input.ndim}D")


def diagflat(input, offset=0):
    """The flattened input as the `offset`-th diagonal of a square matrix."""
    return diag_embed(F.reshape(input, (-1,)), offset)


def _indices(name, row, col, offset, dtype, lower):
    if row < 0 or col < 0:
        raise RuntimeError(f"{name}: row and col must be non-negative, got {row} and {col}")
    fn = np.tril_indices if lower else np.triu_indices
    r, c = fn(row, offset, col)
    return tensor(np.stack([r, c]).astype(np.int64), dtype=dtype or dt.int64)


def tril_indices(row, col, offset=0, *, dtype=None, device=None):
    """The [2, N] coordinates of the lower triangle of a row x col matrix, row by row."""
    out = _indices("tril_indices", row, col, offset, dtype, True)
    return out if device is None else out.to(device)


def triu_indices(row, col, offset=0, *, dtype=None, device=None):
    out = _indices("triu_indices", row, col, offset, dtype, False)
    return out if device is None else out.to(device)


def meshgrid(*tensors, indexing="ij"):
    """Coordinate grids from 1-d tensors: with indexing='ij' output k varies along dim k;
    'xy' swaps the first two (Cartesian)."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    if indexing not in ("ij", "xy"):
        raise RuntimeError(f"torch.meshgrid: indexing must be one of \"xy\" or \"ij\", but "
                           f"received: {indexing}")
    for t in tensors:
        if t.ndim > 1:
            raise RuntimeError(f"torch.meshgrid: Expected 0D or 1D tensor in the tensor list "
                               f"but got: {t}")
    sizes = [t.numel() for t in tensors]
    order = list(range(len(tensors)))
    if indexing == "xy" and len(tensors) >= 2:
        order[0], order[1] = 1, 0
    shape = tuple(sizes[k] for k in order)
    out = []
    for k, t in enumerate(tensors):
        where = order.index(k)
        view = [1] * len(tensors)
        view[where] = sizes[k]
        out.append(F.expand_to(F.reshape(t, tuple(view)), shape))
    return tuple(out)


# ---- products ------------------------------------------------------------------------------
def _same_dtype(name, *xs):
    ds = {x.dtype for x in xs if isinstance(x, Tensor)}
    if len(ds) > 1:
        raise RuntimeError(f"{name}: expected the operands to have the same dtype, got "
                           f"{', '.join(sorted(d.name for d in ds))}")


def _scaled_sum(name, input, product, beta, alpha):
    """beta * input + alpha * product, input ignored for beta == 0 (as PyTorch: NaNs in it
    do not reach the result)."""
    if not input.is_floating_point():  # PyTorch truncates the factors to integers
        beta, alpha = int(beta), int(alpha)
    if alpha != 1:
        product = product * alpha
    if beta == 0:
        return F.expand_to(product, broadcast_shapes(name, tuple(input.shape),
                                                     tuple(product.shape)))
    return product + (input if beta == 1 else input * beta)


def _check_result_shape(name, input, shape):
    try:
        if broadcast_shapes(name, tuple(input.shape), tuple(shape)) != tuple(shape):
            raise ValueError
    except ValueError:
        raise RuntimeError(f"{name}: the input of shape {list(input.shape)} does not broadcast "
                           f"to the result's shape {list(shape)}") from None


def baddbmm(input, batch1, batch2, *, beta=1, alpha=1):
    """beta * input + alpha * (batch1 @ batch2) for [B, N, M] and [B, M, P] batches."""
    if batch1.ndim != 3 or batch2.ndim != 3:
        raise RuntimeError(f"batch1 must be a 3D tensor, batch2 must be a 3D tensor; got "
                           f"{batch1.ndim}D and {batch2.ndim}D")
    _same_dtype("baddbmm", input, batch1, batch2)
    product = F.bmm(batch1, batch2)
    _check_result_shape("baddbmm", input, product.shape)
    return _scaled_sum("baddbmm", input, product, beta, alpha)


def addbmm(input, batch1, batch2, *, beta=1, alpha=1):
    """beta * input + alpha * sum over b of batch1[b] @ batch2[b]."""
    if batch1.ndim != 3 or batch2.ndim != 3:
        raise RuntimeError(f"batch1 must be a 3D tensor, batch2 must be a 3D tensor; got "
                           f"{batch1.ndim}D and {batch2.ndim}D")
    _same_dtype("addbmm", input, batch1, batch2)
    product = F.cast(F.sum(F.bmm(batch1, batch2), 0), batch1.dtype)
    _check_result_shape("addbmm", input, product.shape)
    return _scaled_sum("addbmm", input, product, beta, alpha)


def addmv(input, mat, vec, *, beta=1, alpha=1):
    """beta * input + alpha * (mat @ vec)."""
    if mat.ndim != 2 or vec.ndim != 1:
        raise RuntimeError(f"vector + matrix @ vector expected, got {input.ndim}, {mat.ndim}, "
                           f"{vec.ndim}")
    _same_dtype("addmv", input, mat, vec)
    product = F.matmul(mat, vec)
    _check_result_shape("addmv", input, product.shape)
    return _scaled_sum("addmv", input, product, beta, alpha)


def addr(input, vec1, vec2, *, beta=1, alpha=1):
    """beta * input + alpha * outer(vec1, vec2)."""
    if vec1.ndim != 1 or vec2.ndim != 1:
        raise RuntimeError(f"addr: Expected 1-D argument vec1, but got {vec1.ndim}-D"
                           if vec1.ndim != 1 else
                           f"addr: Expected 1-D argument vec2, but got {vec2.ndim}-D")
    product = F.outer(vec1, vec2)
    _check_result_shape("addr", input, product.shape)
    if input.dtype is dt.bool_:  # PyTorch: logical and/or for bools
        return F.logical_or(F.logical_and(input, bool(beta)), F.logical_and(product,
                                                                             bool(alpha)))
    return _scaled_sum("addr", input, product, beta, alpha)


def kron(input, other):
    """The Kronecker product: every element of input times all of other, in blocks."""
    nd = builtins.max(input.ndim, other.ndim)
    a = F.reshape(input, (1,) * (nd - input.ndim) + tuple(input.shape))
    b = F.reshape(other, (1,) * (nd - other.ndim) + tuple(other.shape))
    a = F.reshape(a, tuple(v for s in a.shape for v in (s, 1)))
    b = F.reshape(b, tuple(v for s in b.shape for v in (1, s)))
    return F.reshape(a * b, tuple(x * y for x, y in zip(
        input.shape if input.ndim == nd else (1,) * (nd - input.ndim) + tuple(input.shape),
        other.shape if other.ndim == nd else (1,) * (nd - other.ndim) + tuple(other.shape))))


def cross(input, other, dim=None):
    """The cross product of 3-vectors along `dim` (default: the first dim of size 3)."""
    if input.ndim != other.ndim:
        raise RuntimeError(f"linalg.cross: inputs must have the same number of dimensions. "
                           f"Got {input.ndim} and {other.ndim}")
    if dim is None:
        dim = next((k for k, s in enumerate(input.shape) if s == 3), None)
        if dim is None:
            raise RuntimeError("no dimension of size 3 in input")
    return _cross(input, other, dim)


def _cross(input, other, dim):
    d = normalize_dim(dim, input.ndim, "cross")
    if input.shape[d] != 3 or other.shape[d] != 3:
        raise RuntimeError(f"linalg.cross: inputs dimension {dim} must have length 3. Got "
                           f"{input.shape[d]} and {other.shape[d]}")
    try:
        shape = broadcast_shapes("cross", tuple(input.shape), tuple(other.shape))
    except ValueError as err:
        raise RuntimeError(str(err)) from None
    a, b = F.expand_to(input, shape), F.expand_to(other, shape)
    x, y = [F.narrow(a, d, k, 1) for k in range(3)], [F.narrow(b, d, k, 1) for k in range(3)]
    return F.cat([x[1] * y[2] - x[2] * y[1], x[2] * y[0] - x[0] * y[2],
                  x[0] * y[1] - x[1] * y[0]], d)


def linalg_cross(input, other, *, dim=-1):
    """torch.linalg.cross: the cross product along `dim` (the last by default)."""
    if input.ndim != other.ndim:
        raise RuntimeError(f"linalg.cross: inputs must have the same number of dimensions. "
                           f"Got {input.ndim} and {other.ndim}")
    return _cross(input, other, dim)


def tensordot(a, b, dims=2):
    """Sum of products over a's last `dims` dimensions and b's first (or the listed pairs
    of dimensions), as one matrix product."""
    if isinstance(dims, Tensor):
        dims = dims.tolist()
    if isinstance(dims, int):
        if dims < 0:
            raise RuntimeError(f"tensordot expects dims >= 0, but got dims={dims}")
        da, db = list(range(a.ndim - dims, a.ndim)), list(range(dims))
    else:
        da, db = dims
        da = [da] if isinstance(da, int) else list(da)
        db = [db] if isinstance(db, int) else list(db)
    if len(da) != len(db):
        raise RuntimeError(f"both dimension lists should have same length, got {len(da)} and "
                           f"{len(db)}")
    da = [normalize_dim(d, a.ndim, "tensordot") for d in da]
    db = [normalize_dim(d, b.ndim, "tensordot") for d in db]
    sa, sb = list(a.shape), list(b.shape)
    for x, y in zip(da, db):  # a size 1 broadcasts against the other
        if a.shape[x] != b.shape[y] and 1 not in (a.shape[x], b.shape[y]):
            raise RuntimeError(f"contracted dimensions need to match, but first has size "
                               f"{a.shape[x]} in dim {x} and second has size {b.shape[y]} in "
                               f"dim {y}")
        sa[x] = sb[y] = builtins.max(a.shape[x], b.shape[y])
    _same_dtype("tensordot", a, b)
    a, b = F.expand_to(a, tuple(sa)), F.expand_to(b, tuple(sb))
    free_a = [k for k in range(a.ndim) if k not in da]
    free_b = [k for k in range(b.ndim) if k not in db]
    k = _prod(a.shape[d] for d in da)
    am = F.reshape(F.permute(a, *(free_a + da)), (_prod(a.shape[d] for d in free_a), k))
    bm = F.reshape(F.permute(b, *(db + free_b)), (k, _prod(b.shape[d] for d in free_b)))
    return F.reshape(F.matmul(am, bm), tuple(a.shape[d] for d in free_a)
                     + tuple(b.shape[d] for d in free_b))


# ---- einsum --------------------------------------------------------------------------------
def _parse_einsum(equation: str, operands) -> tuple[list, list]:
    """Each operand's labels and the output's: letters as themselves, the dims an ellipsis
    stands for as negative numbers (-1 the last), aligned from the right."""
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(operands):
        raise RuntimeError("einsum(): more operands were provided than specified in the "
                         "equation" if len(operands) > len(terms) else
                         "einsum(): fewer operands were provided than specified in the "
                         "equation")
    labels, widest = [], 0
    for term, op in zip(terms, operands):
        if term.count("...") > 1 or term.replace("...", "").count(".") or \
                not all(c.isalpha() for c in term.replace("...", "")):
            raise RuntimeError(f"einsum(): invalid subscript given in the equation "
                               f"string {term!r}")
        letters = term.replace("...", "")
        n_ell = op.ndim - len(letters)
        if ("..." in term and n_ell < 0) or ("..." not in term and n_ell != 0):
            raise RuntimeError(f"einsum(): the number of subscripts in the equation "
                               f"({len(letters)}) does not match the number of dimensions "
                               f"({op.ndim}) for operand {len(labels)}"
                               + ("" if "..." in term else " and no ellipsis was given"))
        head, _, tail = term.partition("...")
        if "..." in term:
            widest = builtins.max(widest, n_ell)
            labels.append(list(head) + list(range(-n_ell, 0)) + list(tail))
        else:
            labels.append(list(term))
    if arrow:
        if rhs.count("...") > 1 or not all(c.isalpha() for c in rhs.replace("...", "")):
            raise RuntimeError(f"einsum(): invalid subscript given in the output {rhs!r}")
        head, _, tail = rhs.partition("...")
        out = list(head) + (list(range(-widest, 0)) if "..." in rhs else []) + list(tail)
        seen = {c for ls in labels for c in ls}
        for c in out:
            if isinstance(c, str) and (c not in seen or out.count(c) > 1):
                raise RuntimeError(f"einsum(): output subscript {c} "
                                   + ("appears more than once in the output" if c in seen else
                                      "does not appear in the equation for any input operand"))
    else:
        counts: dict = {}
        for ls in labels:
            for c in ls:
                if isinstance(c, str):
                    counts[c] = counts.get(c, 0) + 1
        out = list(range(-widest, 0)) + sorted(c for c, n in counts.items() if n == 1)
    return labels, out


def _take_diagonals(x, labels):
    """x with each repeated label's dims replaced by their diagonal (one dim, last)."""
    while True:
        dup = next((c for c in labels if labels.count(c) > 1), None)
        if dup is None:
            return x, labels
        i = labels.index(dup)
        j = labels.index(dup, i + 1)
        if x.shape[i] != x.shape[j]:
            raise RuntimeError(f"einsum(): subscript {dup} is repeated for operand but the "
                               f"sizes don't match, {x.shape[i]} != {x.shape[j]}")
        x = diagonal(x, 0, i, j)
        labels = [c for k, c in enumerate(labels) if k not in (i, j)] + [dup]


def _sum_out(x, labels, keep):
    dims = [k for k, c in enumerate(labels) if c not in keep]
    if not dims:
        return x, labels
    return F.sum(x, tuple(dims)), [c for c in labels if c in keep]


def _contract(a, la, b, lb, keep):
    """a and b multiplied and summed over the labels they share that `keep` lacks."""
    size = {}
    for x, ls in ((a, la), (b, lb)):
        for c, s in zip(ls, x.shape):
            if size.get(c, 1) == 1:
                size[c] = s
            elif s not in (1, size[c]):
                raise RuntimeError(f"einsum(): operands do not broadcast with remapped shapes "
                                   f"(subscript {c}: {size[c]} and {s})")
    common = dt.result_type(a, b)  # integer sums come out int64 (as PyTorch's)
    a, b = F.cast(a, common), F.cast(b, common)
    batch = [c for c in la if c in lb and c in keep]
    summed = [c for c in la if c in lb and c not in keep]
    only_a = [c for c in la if c not in lb]
    only_b = [c for c in lb if c not in la]
    pa = F.permute(a, *[la.index(c) for c in batch + only_a + summed])
    pb = F.permute(b, *[lb.index(c) for c in batch + summed + only_b])
    bshape = tuple(size[c] for c in batch)
    pa = F.expand_to(pa, bshape + tuple(pa.shape[len(batch):len(batch) + len(only_a)])
                     + tuple(size[c] for c in summed))
    pb = F.expand_to(pb, bshape + tuple(size[c] for c in summed)
                     + tuple(pb.shape[len(batch) + len(summed):]))
    m = _prod(pa.shape[len(batch):len(batch) + len(only_a)])
    k = _prod(size[c] for c in summed)
    n = _prod(pb.shape[len(batch) + len(summed):])
    out = F.matmul(F.reshape(pa, bshape + (m, k)), F.reshape(pb, bshape + (k, n)))
    shape = bshape + tuple(pa.shape[len(batch):len(batch) + len(only_a)]) \
        + tuple(pb.shape[len(batch) + len(summed):])
    return F.reshape(out, shape), batch + only_a + only_b


def einsum(equation, *operands):
    """Sums of products named by subscripts, as torch.einsum: 'ij,jk->ik' (matmul),
    'bij->bji', 'ii->i' (a diagonal), '...ij,...jk' (broadcast batches), 'i,i->' (a dot).

    >>> tj.einsum("bhqd,bhkd->bhqk", q, k)   # attention scores
    """
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    if not operands:
        raise RuntimeError("einsum(): must provide at least one operand")
    common = dt.result_type(*operands)
    operands = [F.cast(x, common) for x in operands]
    labels, out = _parse_einsum(equation, operands)
    xs = []
    for x, ls in zip(operands, labels):
        xs.append(list(_take_diagonals(x, ls)))
    for k, (x, ls) in enumerate(xs):
        others = {c for _, o in xs[:k] + xs[k + 1:] for c in o}
        xs[k] = list(_sum_out(x, ls, others | set(out)))
    x, ls = xs[0]
    for k in range(1, len(xs)):
        later = {c for _, o in xs[k + 1:] for c in o} | set(out)
        x, ls = _sum_out(x, ls, later | set(xs[k][1]))
        x, ls = _contract(x, ls, xs[k][0], xs[k][1], later)
    x, ls = _sum_out(x, ls, set(out))
    missing = [c for c in out if c not in ls]  # ellipsis dims no operand has
    for c in missing:
        x, ls = F.unsqueeze(x, 0), [c] + ls
    result = F.permute(x, *[ls.index(c) for c in out]) if x.ndim else x
    return result if result is not operands[0] else F.clone(result)


__all__ = ["diagonal", "diag_embed", "diag", "diagflat", "tril_indices", "triu_indices",
           "meshgrid", "baddbmm", "addbmm", "addmv", "addr", "kron", "cross", "tensordot",
           "einsum"]


def _install_methods() -> None:
    for name in ("diagonal", "diag_embed", "diag", "diagflat", "baddbmm", "addbmm", "addmv",
                 "addr", "kron", "cross"):
        setattr(Tensor, name, globals()[name])


_install_methods()
