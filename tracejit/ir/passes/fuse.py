"""Fusion: chains of elementwise ops (with broadcasting) become one `fused` node, and
reductions over the last dimension join them as row kernels (softmax, layer norm,
sums of squares: reduce a row, then keep computing with the result). Sums over all
rows (bias and norm-weight gradients) join a row kernel too, as per-block partial
sums.

A fused node holds its ops as a region (a sub-graph); code generators turn each
region into one kernel. Why two adjacent ops were not fused is recorded in the
graph's notes (shown by `.explain()`).
"""
from __future__ import annotations

import heapq

from ...ops import OPS
from ...ops.registry import ELEMENTWISE, REDUCE, SHAPE
from ...ops.scalar import IDENTITY
from ...core.symbolic import same_dim
from ..graph import FUSED, Graph, Value, symbols_bound, symbols_read
from .rewrite import Builder
from ..walk import copy_node



def _elementwise(node) -> bool:
    """An op a kernel computes per element: elementwise ops with a scalar expression, and
    view ops the table marks as element identities (expr IDENTITY: detach, since kernels
    run only when no gradient is recorded; expand, since kernels read every input at its
    broadcast index)."""
    op = OPS[node.op] if node.op in OPS else None
    if op is None or op.expr is None:
        return False
    return op.kind == ELEMENTWISE or (op.kind == SHAPE and op.expr == IDENTITY)


def _row_reduction(node) -> bool:
    """A reduction over the last dimension only: it fuses into a row kernel. That
    includes `sum_to` a shape that differs only by a last dimension of 1 (gradients
    of row broadcasts)."""
    if not node.inputs or not isinstance(node.inputs[0], Value):
        return False
    shape = node.inputs[0].shape
    if node.op == "sum_to":
        target = node.attrs["shape"]
        return len(target) == len(shape) > 0 and _one(target[-1]) and \
            not (isinstance(shape[-1], int) and shape[-1] == 1) and \
            all(same_dim(a, b) for a, b in zip(target[:-1], shape[:-1]))
    op = OPS[node.op] if node.op in OPS else None
    return op is not None and op.kind == REDUCE and op.monoid is not None and \
        len(shape) > 0 and node.attrs.get("dim") == (len(shape) - 1,)


def _one(size) -> bool:
    """A size that is 1 as written (a symbolic size is not compared: that would guard the
    program on its value)."""
    return type(size) is int and size == 1


def column_sum(node) -> bool:
    """`sum_to` a shape [N] from [..., N]: a sum over every row (the gradient of a bias or
    a norm's weight). It fuses into a row kernel, which adds each row into the partial
    sums of its block of rows as it goes, instead of writing the summed value out and
    reading it back."""
    if node.op != "sum_to" or not node.inputs or not isinstance(node.inputs[0], Value):
        return False
    shape, target = node.inputs[0].shape, node.attrs["shape"]
    return node.outputs[0].dtype.category == 2 and len(shape) >= 2 and len(target) == 1 \
        and same_dim(target[0], shape[-1]) and not (isinstance(shape[-1], int) and
                                                    shape[-1] == 1)


def _fits_frame(values, frame) -> bool:
    """Every value broadcasts to [*lead, N] along whole rows: right-aligned, each leading
    size equal or 1, the last N or 1 (a value per row)."""
    lead, n = frame
    for v in values:
        if len(v.shape) > len(lead) + 1 or not v.shape:
            return not v.shape  # a 0-d value broadcasts everywhere
        pad = (1,) * (len(lead) + 1 - len(v.shape)) + tuple(v.shape)
        if not all(_one(a) or same_dim(a, b) for a, b in zip(pad[:-1], lead)):
            return False
        if not (same_dim(pad[-1], n) or _one(pad[-1])):
            return False
    return True


def _split_full_sums(graph: Graph) -> Graph:
    """A float sum of every element of a value an elementwise op computes (a loss
    `(out * g).sum()`) becomes a sum over rows (`sum_to` [N], which fuses into the row
    kernel as per-block partial sums) and a sum of that one row: the product is never
    written out and read back."""
    producer = {v: n for n in graph.nodes for v in n.outputs}

    def splits(node) -> bool:
        if node.op != "sum" or node.attrs.get("dim") is not None or node.attrs.get(
                "keepdim") or node.attrs.get("dtype") is not None:
            return False
        x = node.inputs[0]
        return isinstance(x, Value) and len(x.shape) >= 2 and x.dtype.category == 2 and \
            x.dtype is node.outputs[0].dtype and x in producer and _elementwise(producer[x])
    if not any(splits(n) for n in graph.nodes):
        return graph
    b = Builder(graph, graph.made_by)
    for node in graph.nodes:
        if not splits(node):
            b.copy(node)
            continue
        x = node.inputs[0]
        rows = b.emit("sum_to", [b.get(x)], {"shape": (x.shape[-1],)},
                      [(x.dtype, (x.shape[-1],))], node)
        total = b.emit("sum", [rows.outputs[0]], dict(node.attrs),
                       [(v.dtype, v.shape) for v in node.outputs], node)
        b.map[node.outputs[0]] = total.outputs[0]
    return b.finish()


def _downstream(node, users) -> set:
    """ids of the nodes that depend on `node`."""
    seen, stack = set(), list(node.outputs)
    while stack:
        for u in users.get(stack.pop(), ()):
            if id(u) not in seen:
                seen.add(id(u))
                stack += u.outputs
    return seen


def _same_frame(a, b) -> bool:
    return len(a[0]) == len(b[0]) and all(same_dim(x, y) for x, y in zip(
        a[0] + (a[1],), b[0] + (b[1],)))


def _why_not(node) -> str:
    if node.op == "guard":
        return "a guard reads a value in the middle"
    if node.op in OPS and OPS[node.op].kind == REDUCE and "dim" in node.attrs:
        dim = node.attrs.get("dim")
        over = "every dimension" if dim is None else f"dimensions {dim}" if isinstance(
            dim, (tuple, list)) else f"dimension {dim}"
        return f"{node.op} reduces over {over}, not only the last one"
    if node.op in OPS:
        op = OPS[node.op]
        if op.kind == ELEMENTWISE:
            return f"{node.op} has no scalar expression for kernels"
        return f"{node.op} is a {op.kind} op"
    return f"{node.op} is not fusible"


MAX_REGION_NODES = 96


def _one_space(values) -> bool:
    """The values' shapes broadcast to one shape, decided without run-time sizes: an
    elementwise kernel iterates over it (an outer product's [M, N] and another's [K, N]
    read the same [1, N] row, but are two loops)."""
    rank = max((len(v.shape) for v in values), default=0)
    for d in range(1, rank + 1):
        size = None
        for v in values:
            if len(v.shape) < d:
                continue
            x = v.shape[-d]
            if type(x) is int and x == 1:
                continue
            if size is None:
                size = x
            elif not same_dim(size, x):
                return False
    return True


def fuse(graph: Graph) -> Graph:
    """Fuse `graph`'s straight-line code, and that of every branch and loop body in it."""
    if graph.has_control_flow():
        b = Builder(graph, graph.made_by, recurse=fuse)
        for node in graph.nodes:
            b.copy(node)
        graph = b.finish()
    graph = _split_full_sums(graph)
    nodes = graph.nodes
    index = {id(n): i for i, n in enumerate(nodes)}
    producer = {v: n for n in nodes for v in n.outputs}
    after = _symbol_binders(nodes)
    users: dict = {}
    for n in nodes:
        for x in n.inputs:
            if isinstance(x, Value):
                users.setdefault(x, []).append(n)
    external = set(graph.outputs) | {v for _, v in graph.mutations}

    group_of: dict = {}      # id(node) -> group id (follow `find` after merges)
    groups: dict = {}        # group id -> [nodes]
    kinds: dict = {}         # group id -> 'elementwise' | 'reduce'
    # what depends on what, as bit masks over group ids (a set per node would make long
    # chains quadratic): a node's upstream groups; per group, the ids merged into it and
    # the union of its members' upstream groups
    reach: dict = {}         # id(node) -> mask of groups it depends on (transitively)
    members_mask: dict = {}  # group id -> mask of the ids merged into it
    group_reach: dict = {}   # group id -> mask of the groups its members depend on
    parent: dict = {}        # merged group -> the group it joined
    notes = []

    def find(g):
        while g in parent:
            g = parent[g]
        return g

    def group(node):
        g = group_of.get(id(node))
        return None if g is None else find(g)

    def reach_of(p) -> int:
        g = group(p)
        return reach[id(p)] | (members_mask[g] if g is not None else 0)

    def depends_on(g, h) -> bool:
        """Some member of group g depends (directly or not) on group h."""
        return bool(group_reach[g] & members_mask[h])

    frames: dict = {}        # row group -> (leading dims, row length)
    terminal: dict = {}      # value of a row group no member may consume -> why

    def values_of(node):
        return [x for x in node.inputs if isinstance(x, Value)] + list(node.outputs)

    def can_join(n, g) -> str | None:
        """None if n may join group g, else the reason it may not."""
        for x in n.inputs:
            if isinstance(x, Value) and x in terminal:
                return terminal[x]
        if len(groups[g]) >= MAX_REGION_NODES:
            return (f"the kernel has {MAX_REGION_NODES} ops already (Numba's compile time "
                    "grows faster than a kernel's length; a long chain becomes several "
                    "kernels, and repeated ones compile once)")
        if column_sum(n):
            x = n.inputs[0]
            frame = frames.get(g) or (tuple(x.shape[:-1]), x.shape[-1])
            members = [v for m in groups[g] for v in values_of(m)]
            whole = len(x.shape) == len(frame[0]) + 1 and all(
                same_dim(a, b) for a, b in zip(x.shape, frame[0] + (frame[1],)))
            if not whole or not _fits_frame(members, frame):
                return "the summed value does not cover the row kernel's frame"
        elif _row_reduction(n):
            frame = frames.get(g) or (tuple(n.inputs[0].shape[:-1]), n.inputs[0].shape[-1])
            members = [v for m in groups[g] for v in values_of(m)]
            if not _fits_frame(members + [n.inputs[0]], frame):
                return "the chain's shapes do not fit one row kernel"
            if not same_dim(n.inputs[0].shape[-1], frame[1]):
                # a row kernel reduces over its whole row: a value that is one per row (a
                # [B, 1] reduced again) would be read once per element of the row
                return "it reduces a value shorter than the row kernel's rows"
        elif g in frames and not _fits_frame(values_of(n), frames[g]):
            return "its shapes do not fit the row kernel"
        elif g not in frames and not _one_space(
                [v for m in groups[g] for v in values_of(m)] + values_of(n)):
            return "its shapes and the kernel's do not broadcast to one iteration space"
        return None

    for n in nodes:
        prods = [producer[x] for x in n.inputs if isinstance(x, Value) and x in producer]
        upstream = 0
        for p in prods + after.get(id(n), []):
            upstream |= reach_of(p)
        reach[id(n)] = upstream
        chosen = None
        fusible = _elementwise(n) or _row_reduction(n) or column_sum(n)
        if fusible:
            candidates = prods
            if column_sum(n):  # also a kernel that reads the summed value as an input
                candidates = prods + [u for u in users.get(n.inputs[0], ())
                                      if group(u) is not None and u is not n]
            for p in candidates:
                g = group(p)
                if g is None:
                    continue
                # another producer, or the group it belongs to, depending on g through an
                # op outside g would make the fused node depend on itself
                if any((reach_of(q) | group_reach.get(group(q), 0)) & members_mask[g]
                       for q in prods + after.get(id(n), []) if group(q) != g):
                    notes.append(f"{p.op} -> {n.op} not fused: the group would depend on "
                                 "itself through an op outside it")
                    continue
                why = can_join(n, g)
                if why:
                    notes.append(f"{p.op} -> {n.op} not fused: {why}")
                    continue
                chosen = g
                break
        if chosen is not None:  # merge independent sibling groups
            for p in prods:
                h = group(p)
                if h is None or h == chosen or \
                        len(groups[h]) + len(groups[chosen]) >= MAX_REGION_NODES or \
                        depends_on(h, chosen) or depends_on(chosen, h):
                    continue
                frame = frames.get(chosen) or frames.get(h)
                if frame is None and not _one_space(
                        [v for m in groups[h] + groups[chosen] for v in values_of(m)]):
                    continue
                if frame is not None and not (
                        _same_frame(frames.get(h, frame), frame) and
                        _same_frame(frames.get(chosen, frame), frame) and _fits_frame(
                            [v for m in groups[h] + groups[chosen] for v in values_of(m)],
                            frame)):
                    continue
                groups[chosen] += groups.pop(h)
                parent[h] = chosen
                members_mask[chosen] |= members_mask.pop(h)
                group_reach[chosen] |= group_reach.pop(h)
                if frame is not None:
                    frames[chosen], kinds[chosen] = frame, "row"
        if chosen is None and fusible and not column_sum(n):
            chosen = len(groups) + len(parent)
            groups[chosen], kinds[chosen] = [], "elementwise"
            members_mask[chosen], group_reach[chosen] = 1 << chosen, 0
        if chosen is not None:
            groups[chosen].append(n)
            group_of[id(n)] = chosen
            group_reach[chosen] |= upstream
            if _row_reduction(n) or column_sum(n):
                kinds[chosen] = "row"
                frames.setdefault(chosen, (tuple(n.inputs[0].shape[:-1]),
                                           n.inputs[0].shape[-1]))
                if column_sum(n):
                    terminal[n.outputs[0]] = ("a sum over all rows is complete only when its "
                                              "row kernel ends")
                elif not n.attrs.get("keepdim") and n.op != "sum_to":
                    terminal[n.outputs[0]] = "a reduction without keepdim ends its row kernel"
    for n in nodes:  # a sum over the rows of a value that later kernels read
        if column_sum(n) and group(n) is None:
            later = _downstream(n, users)
            for u in users.get(n.inputs[0], ()):
                g = group(u)
                if g is not None and not any(id(m) in later for m in groups[g]) and \
                        can_join(n, g) is None:
                    groups[g].append(n)
                    group_of[id(n)] = g
                    kinds[g] = "row"
                    frames.setdefault(g, (tuple(n.inputs[0].shape[:-1]),
                                          n.inputs[0].shape[-1]))
                    break
    group_of = {k: find(g) for k, g in group_of.items()}
    for g in groups:  # members in graph order
        groups[g].sort(key=lambda m: index[id(m)])
    for n in nodes:  # explain the unfused neighbours
        for x in n.inputs:
            p = producer.get(x) if isinstance(x, Value) else None
            if p is None or (id(p) in group_of and group_of.get(id(p)) == group_of.get(id(n))):
                continue
            if not (_elementwise(n) or _row_reduction(n) or column_sum(n)) or \
                    not _elementwise(p):
                pair = f"{p.op} -> {n.op} not fused: "
                if any(note.startswith(pair) for note in notes):
                    continue  # the pair's reason is noted already
                blocker = p if not _elementwise(p) else n
                notes.append(pair + _why_not(blocker))
    fused = {g: ns for g, ns in groups.items() if len(ns) >= 2}
    return _rebuild(graph, fused, kinds, group_of, index, users, external, notes, after)


def _symbol_binders(nodes) -> dict:
    """id(node) -> the earlier nodes that bind a size symbol it reads: it must stay after
    them (a kernel scaled by a loop's trip count runs after the loop)."""
    binder, after = {}, {}
    for n in nodes:
        reads = [binder[s] for s in sorted(symbols_read(n)) if s in binder]
        if reads:
            after[id(n)] = reads
        binder.update(dict.fromkeys(symbols_bound(n), n))
    return after


def _rebuild(graph, fused, kinds, group_of, index, users, external, notes, after) -> Graph:
    unit_of = {}
    for n in graph.nodes:
        g = group_of.get(id(n))
        unit_of[id(n)] = ("g", g) if g in fused else ("n", id(n))
    # topological order of units (a group is one unit), earliest original position first:
    # Kahn's algorithm over the units, ready units taken by their first member's position
    producer = {v: n for n in graph.nodes for v in n.outputs}
    unit_nodes: dict = {}
    first: dict = {}
    for k, n in enumerate(graph.nodes):
        unit_nodes.setdefault(unit_of[id(n)], []).append(n)
        first.setdefault(unit_of[id(n)], k)
    successors: dict = {unit: set() for unit in unit_nodes}
    waiting = dict.fromkeys(unit_nodes, 0)
    for n in graph.nodes:
        unit = unit_of[id(n)]
        for p in [producer.get(x) if isinstance(x, Value) else None for x in n.inputs] + \
                after.get(id(n), []):
            if p is not None and unit_of[id(p)] != unit and \
                    unit not in successors[unit_of[id(p)]]:
                successors[unit_of[id(p)]].add(unit)
                waiting[unit] += 1
    ready = [(first[u], u) for u, w in waiting.items() if w == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        _, unit = heapq.heappop(ready)
        order.append(unit)
        for nxt in successors[unit]:
            waiting[nxt] -= 1
            if waiting[nxt] == 0:
                heapq.heappush(ready, (first[nxt], nxt))
    if len(order) != len(unit_nodes):
        raise AssertionError("fusion produced a cycle")
    b = Builder(graph, "fuse")
    b.graph.notes = list(dict.fromkeys(graph.notes + notes))
    for unit in order:
        members = unit_nodes[unit]
        if unit[0] == "n":
            b.copy(members[0])
        else:
            _emit_group(b, members, kinds[unit[1]], users, external)
    return b.finish()


def _emit_group(b: Builder, members, kind: str, users, external) -> None:
    member_ids = {id(m) for m in members}
    produced = {v for m in members for v in m.outputs}
    region = Graph("region", made_by="fuse")
    local: dict = {}
    outer_inputs = []
    for m in members:
        for x in m.inputs:
            if isinstance(x, Value) and x not in local and x not in produced:
                rv = Value(x.dtype, x.shape, None, f"in{len(outer_inputs)}")
                region.inputs.append(rv)
                local[x] = rv
                outer_inputs.append(b.get(x))
    def get(x):
        return local.get(x, x) if isinstance(x, Value) else x
    for m in members:
        node = copy_node(region, m, get)
        for old, new in zip(m.outputs, node.outputs):
            local[old] = new
    outs = [v for m in members for v in m.outputs
            if v in external or any(id(u) not in member_ids for u in users.get(v, []))]
    region.outputs = [local[v] for v in outs]
    node = b.emit(FUSED, outer_inputs, {"kind": kind}, [(v.dtype, v.shape) for v in outs],
                  members[-1])
    node.regions = [region]
    node.modes = members[-1].modes
    for old, new in zip(outs, node.outputs):
        b.map[old] = new
