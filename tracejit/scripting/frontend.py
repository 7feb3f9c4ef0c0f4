"""The `@tj.script` frontend: a function's source, rewritten so that its control flow
goes through the branch and loop helpers of `control_flow` (the runtime's `if_`,
`while_`, `for_range`, ...), which record regions when the function is captured.

Two passes over the `ast`: `_lower_exits` turns `return`, `break` and `continue` inside
branches and loops into assignments (the rest of a block moves into the branch that
does not exit, or runs under a flag), then `_Converter` turns each `if`, `while` and
`for` into functions over the variables it assigns and one helper call. The new code
keeps the user's file and line numbers, reads the function's globals live and its
closure through the original cells. What the subset does not cover raises ScriptError
naming the construct, the file and the line.
"""
from __future__ import annotations

import ast
import copy
import inspect
import textwrap
import types

from .control_flow import ScriptError, raise_from_line
from ..core.lazy import lazy

_runtime = lazy("tracejit.scripting.runtime")  # (it imports this module)

RUNTIME = "__tj__"   # the name converted code calls the helpers by
_PREFIX = "__tj_"    # generated names (flags, branch and body functions)


def _where(filename: str, node) -> str:
    return f"{filename}:{getattr(node, 'lineno', '?')}"


# ---- the subset -------------------------------------------------------------------------------
_REFUSED = {
    ast.Yield: "a generator (yield)", ast.YieldFrom: "a generator (yield from)",
    ast.Await: "await", ast.AsyncFunctionDef: "an async function", ast.AsyncFor: "async for",
    ast.AsyncWith: "async with", ast.Global: "a global statement",
    ast.Nonlocal: "a nonlocal statement", ast.Try: "try/except", ast.Delete: "del",
    ast.ClassDef: "a class definition", ast.Match: "match", ast.TryStar: "try/except*",
}


class _Checker(ast.NodeVisitor):
    def __init__(self, filename: str):
        self.filename = filename
        self.depth = 0  # nesting of function definitions: nested ones are left as Python

    def generic_visit(self, node):
        kind = _REFUSED.get(type(node))
        if kind is not None:
            raise ScriptError(f"{_where(self.filename, node)}: {kind} is not supported by "
                              "tj.script; use tj.trace for this function, or move the "
                              "construct into a function called outside the scripted code")
        if isinstance(node, (ast.For, ast.While)) and node.orelse:
            raise ScriptError(f"{_where(self.filename, node)}: a loop with an else clause "
                              "is not supported by tj.script")
        if isinstance(node, ast.Raise) and node.exc is None:
            raise ScriptError(f"{_where(self.filename, node)}: a bare raise is not "
                              "supported by tj.script")
        if isinstance(node, ast.With):
            for inner in ast.walk(node):
                if isinstance(inner, (ast.Return, ast.Break, ast.Continue)):
                    raise ScriptError(f"{_where(self.filename, inner)}: return, break or "
                                      "continue inside a with block is not supported by "
                                      "tj.script")
        if isinstance(node, (ast.FunctionDef, ast.Lambda)) and self.depth:
            return  # a nested function is a Python value: called, it is converted itself
        self.depth += isinstance(node, ast.FunctionDef)
        super().generic_visit(node)
        self.depth -= isinstance(node, ast.FunctionDef)


# ---- names a block assigns ----------------------------------------------------------------------
class _Assigned(ast.NodeVisitor):
    """`scope`: the function's own variables (parameters and assigned names). A container
    or tensor changed in place is a variable the block changes only when it is one of
    them: a global or closure variable (`LOG.append(i)` on a global list) stays the
    outer name, read where it is used (carried, it would become a local of the function,
    unbound where it is loaded), and the call's helper refuses the change by its line."""

    def __init__(self, scope=None):
        self.names: list = []
        self.scope = scope

    def _changed(self, name: str):
        if self.scope is None or name in self.scope:
            self._add(name)

    def _add(self, name: str):
        if name not in self.names and name != RUNTIME and not name.startswith(_PREFIX + "f"):
            self.names.append(name)

    def visit_Name(self, node):
        if isinstance(node.ctx, ast.Store):
            self._add(node.id)

    def visit_FunctionDef(self, node):
        self._add(node.name)  # its body is another scope

    def visit_Lambda(self, node):
        pass

    def visit_ListComp(self, node):
        pass

    visit_SetComp = visit_DictComp = visit_GeneratorExp = visit_ListComp

    def visit_NamedExpr(self, node):
        self._add(node.target.id)
        self.visit(node.value)

    def visit_Subscript(self, node):
        # `x[i] = v`, `x[i] += v`: the tensor is a variable the block changes
        if isinstance(node.ctx, ast.Store) and isinstance(node.value, ast.Name):
            self._changed(node.value.id)
        self.generic_visit(node)

    def visit_Expr(self, node):
        # `xs.append(t)`, `x.add_(1)`: the list or tensor is a variable the block changes
        call = node.value
        if isinstance(call, ast.Call) and _is_runtime_call(call) and call.args:
            call = ast.Call(func=call.args[0], args=call.args[1:], keywords=[])  # converted
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and \
                isinstance(call.func.value, ast.Name) and (
                    call.func.attr in ("append", "extend", "insert", "pop") or
                    (call.func.attr.endswith("_") and not call.func.attr.startswith("_"))):
            self._changed(call.func.value.id)
        self.generic_visit(node)


def assigned(stmts, scope=None) -> list:
    v = _Assigned(scope)
    for s in stmts:
        v.visit(s)
    return v.names


# ---- pass 1: return, break and continue become assignments -------------------------------------
def _name(id_: str, store: bool = False):
    return ast.Name(id=id_, ctx=ast.Store() if store else ast.Load())


def _assign(name: str, value) -> ast.Assign:
    return ast.Assign(targets=[_name(name, True)], value=value)


def _const(v):
    return ast.Constant(value=v)


def _always_exits(stmts) -> str | None:
    """'return', 'break', 'continue' or 'raise' when every path through `stmts` leaves
    the block that way (the first such statement decides), else None."""
    for s in stmts:
        if isinstance(s, ast.Return):
            return "return"
        if isinstance(s, ast.Break):
            return "break"
        if isinstance(s, ast.Continue):
            return "continue"
        if isinstance(s, ast.Raise):
            return "raise"
        if isinstance(s, ast.If):
            a, b = _always_exits(s.body), _always_exits(s.orelse)
            if a and b and a == b:
                return a
    return None


def _may_exit(stmts, kinds=(ast.Return, ast.Break, ast.Continue)) -> bool:
    """Whether a return/break/continue of this block's loop (or function) is inside."""
    for s in stmts:
        for inner in _walk_same_loop(s):
            if isinstance(inner, kinds):
                return True
    return False


def _walk_same_loop(node):
    """The statements under `node` that belong to the same loop level (a nested loop's
    break and continue are its own; a return still leaves)."""
    yield node
    if isinstance(node, (ast.FunctionDef, ast.Lambda)):
        return
    for child in ast.iter_child_nodes(node):
        if isinstance(node, (ast.For, ast.While)) and child in node.body:
            for inner in ast.walk(child):
                if isinstance(inner, ast.Return):
                    yield inner
            continue
        yield from _walk_same_loop(child)


class _Loop:
    def __init__(self, k: int):
        self.brk = f"{_PREFIX}brk{k}"
        self.cont = f"{_PREFIX}cont{k}"
        self.breaks = False
        self.continues = False


class _Lowering:
    """Pass 1: exits become assignments (see the module docstring)."""

    def __init__(self, filename: str):
        self.filename = filename
        self.counter = 0             # loops seen: names their break/continue flags
        self.moved_return = False    # a return became `__tj_ret = ...`
        self._nested_return = False  # inside a branch or loop (a return there is moved)

    def function(self, fn: ast.FunctionDef) -> None:
        body = self.block(fn.body, None)
        head = []
        if self.moved_return:  # a path that does not return gives None, as in Python
            head.append(_assign(_PREFIX + "ret", _const(None)))
        if self.moved_return and not isinstance(body[-1], ast.Return):
            body.append(ast.Return(value=_name(_PREFIX + "ret")))
        fn.body = head + body

    def block(self, stmts, loop: _Loop | None) -> list:
        out = []
        for k, s in enumerate(stmts):
            rest = stmts[k + 1:]
            if isinstance(s, ast.Return):
                if loop is not None:
                    raise ScriptError(
                        f"{_where(self.filename, s)}: return inside a loop is not supported "
                        "by tj.script; assign the result, break, and return after the loop")
                if not self._nested_return:
                    out.append(s)
                else:
                    self.moved_return = True
                    out.append(_assign(_PREFIX + "ret", s.value or _const(None)))
                return out
            if isinstance(s, ast.Break):
                loop.breaks = True
                out.append(_assign(loop.brk, _const(True)))
                return out
            if isinstance(s, ast.Continue):
                loop.continues = True
                out.append(_assign(loop.cont, _const(True)))
                return out
            if isinstance(s, ast.Raise):
                out.append(s)
                return out
            if isinstance(s, ast.If):
                exits = _may_exit([s])  # before _if rewrites its exits
                out += self._if(s, rest, loop)
                if exits:
                    return out
                continue
            if isinstance(s, (ast.For, ast.While)):
                out += self._loop(s)
                continue
            out.append(s)
        return out

    def _if(self, s: ast.If, rest, loop) -> list:
        saved = self._nested_return
        self._nested_return = True
        try:
            exit_then, exit_else = _always_exits(s.body), _always_exits(s.orelse)
            exits = ("return", "break", "continue")
            if not _may_exit([s]):
                s.body, s.orelse = self.block(s.body, loop), self.block(s.orelse, loop)
                return [s]
            if exit_then in exits and exit_else not in exits:
                # the rest of the block runs only on the other path: move it there
                s.body = self.block(s.body, loop)
                s.orelse = self.block(s.orelse + rest, loop)
                return [s]
            if exit_else in exits and exit_then not in exits:
                s.orelse = self.block(s.orelse, loop)
                s.body = self.block(s.body + rest, loop)
                return [s]
            if exit_then in exits and exit_else in exits:
                s.body, s.orelse = self.block(s.body, loop), self.block(s.orelse, loop)
                return [s]
            if loop is None:
                # a return on some paths of a branch (outside loops, only returns leave):
                # the rest of the block runs after each path that goes on, so that every
                # path ends in a return and gives the result a value of its own (the second
                # path gets a copy: lowering and converting change statements in place, so
                # one statement object must not stand in two places)
                again = copy.deepcopy(rest)
                s.body = self.block(s.body + rest, loop)
                s.orelse = self.block(s.orelse + again, loop)
                return [s]
            # in a loop, a break or continue on some paths: the rest runs under the flags
            # it sets (found before the branches are lowered: lowering turns the break and
            # continue, nested ifs' included, into the flags' assignments)
            flags = []
            if _may_exit([s], (ast.Break,)):
                flags.append(loop.brk)
            if _may_exit([s], (ast.Continue,)):
                flags.append(loop.cont)
            s.body, s.orelse = self.block(s.body, loop), self.block(s.orelse, loop)
            out = [s]
            if rest:
                test = ast.UnaryOp(op=ast.Not(), operand=_name(flags[0])) if len(flags) == 1 \
                    else ast.UnaryOp(op=ast.Not(), operand=ast.BoolOp(
                        op=ast.Or(), values=[_name(f) for f in flags]))
                out.append(ast.copy_location(ast.If(test=test, body=self.block(rest, loop),
                                                    orelse=[]), rest[0]))
            return out
        finally:
            self._nested_return = saved

    def _loop(self, s) -> list:
        self.counter += 1
        loop = _Loop(self.counter)
        saved = self._nested_return
        self._nested_return = True
        try:
            body = self.block(s.body, loop)
        finally:
            self._nested_return = saved
        if loop.continues:
            body = [_assign(loop.cont, _const(False))] + body
        s.body = body or [ast.Pass()]
        out = []
        if loop.breaks:
            out.append(ast.copy_location(_assign(loop.brk, _const(False)), s))
            s._tj_break = loop.brk
        out.append(s)
        return out


# ---- pass 2: control flow becomes helper calls -------------------------------------------------
def _rt(attr: str):
    return ast.Attribute(value=_name(RUNTIME), attr=attr, ctx=ast.Load())


def _call(attr: str, *args):
    return ast.Call(func=_rt(attr), args=list(args), keywords=[])


def _tuple(names, store=False):
    return ast.Tuple(elts=[_name(n, store) for n in names], ctx=ast.Store() if store else
                     ast.Load())


def _def(name: str, params: list, body: list, returns: list | None) -> ast.FunctionDef:
    body = list(body) + ([ast.Return(value=_tuple(returns))] if returns is not None else [])
    return ast.FunctionDef(name=name, args=ast.arguments(
        posonlyargs=[], args=[ast.arg(arg=p) for p in params], vararg=None, kwonlyargs=[],
        kw_defaults=[], kwarg=None, defaults=[]), body=body or [ast.Pass()],
        decorator_list=[], returns=None, type_params=[])


def _names(names):
    """The variables' names as a tuple of strings (for the helpers' messages)."""
    return ast.Tuple(elts=[_const(_SHOWN.get(n, n)) for n in names], ctx=ast.Load())


_SHOWN = {_PREFIX + "ret": "(the return value)"}  # generated names as messages call them


def _results(names, call):
    """`(a, b) = call`, or the call alone when the construct assigns nothing."""
    if not names:
        return ast.Expr(value=call)
    return ast.Assign(targets=[_tuple(names, True)], value=call)


def _load_maybe(names) -> list:
    """`v = __tj__.ld(lambda: v)`: a variable not assigned yet becomes an Undefined."""
    return [_assign(n, _call("ld", ast.Lambda(args=ast.arguments(
        posonlyargs=[], args=[], vararg=None, kwonlyargs=[], kw_defaults=[], kwarg=None,
        defaults=[]), body=_name(n)), _const(n))) for n in names]


class _Tests(ast.NodeTransformer):
    """In conditions: `not`, `and`, `or` and `a if c else b` go through helpers that keep
    a tensor a tensor (elsewhere Python's own meaning is kept)."""

    def visit_UnaryOp(self, node):
        self.generic_visit(node)
        if isinstance(node.op, ast.Not):
            return ast.copy_location(_call("not_", node.operand), node)
        return node

    def visit_BoolOp(self, node):
        self.generic_visit(node)
        helper = "and_" if isinstance(node.op, ast.And) else "or_"
        return ast.copy_location(_call(helper, *[_thunk(v) for v in node.values]), node)


def _thunk(expr):
    return ast.Lambda(args=ast.arguments(posonlyargs=[], args=[], vararg=None,
                                         kwonlyargs=[], kw_defaults=[], kwarg=None,
                                         defaults=[]), body=expr)


def _test(expr):
    return _Tests().visit(expr)


class _Converter(ast.NodeTransformer):
    def __init__(self, filename: str, local: frozenset = frozenset(), scope=None):
        self.filename = filename
        self.counter = 0
        self.depth = 0
        self.local = local  # names the function assigns (its parameters are not)
        self.scope = scope  # the function's variables, parameters included

    def _fresh(self, what: str) -> str:
        self.counter += 1
        return f"{_PREFIX}f{self.counter}_{what}"

    def visit(self, node):
        # what a statement or expression becomes is on its own line (not the enclosing
        # `if`'s, which `_at` gives what is left): a frame running the generated helper
        # call then reports the user's line (asserts, raises, errors of calls)
        new = super().visit(node)
        if isinstance(new, ast.AST) and hasattr(node, "lineno"):
            for n in ast.walk(new):
                if "lineno" in n._attributes and not hasattr(n, "lineno"):
                    ast.copy_location(n, node)
        return new

    def visit_FunctionDef(self, node):
        if self.depth:  # a nested def stays Python (it is converted when it is called)
            return node
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1
        return node

    def visit_Lambda(self, node):
        return node

    def visit_Assign(self, node):
        self._refuse_outer_attribute_stores(node, node.targets)
        self.generic_visit(node)
        return self._check_stores(node, node.targets)

    def visit_AugAssign(self, node):
        self._refuse_outer_attribute_stores(node, [node.target])
        self.generic_visit(node)
        return self._check_stores(node, [node.target])

    def _check_stores(self, node, targets):
        """`xs[i] = v`: the helper first checks that xs is not a list value (whose
        elements the graph fixes when they are appended)."""
        checks = []
        for target in targets:
            for t in ast.walk(target):
                if isinstance(t, ast.Subscript) and isinstance(t.ctx, ast.Store) and \
                        _plain(t.value):
                    helper = "store" if self._is_local(t.value) else "store_outer"
                    checks.append(_at(ast.Expr(value=_call(helper, t.value)), node))
        return checks + [node] if checks else node

    def visit_Return(self, node):
        # a variable script mode leaves undefined raises where it is returned, as a use
        self.generic_visit(node)
        if node.value is not None:
            node.value = ast.copy_location(_call("result", node.value), node.value)
        return node

    def visit_Call(self, node):
        self.generic_visit(node)
        if isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name) and \
                node.func.value.id == RUNTIME:
            return node
        # a method of an object from outside the function (a global, a parameter, self):
        # the helper refuses it when it changes a container (it would run only while the
        # function is compiled)
        helper = "call_outer" if isinstance(node.func, ast.Attribute) and \
            node.func.attr in _MUTATORS and not self._is_local(node.func.value) else "call"
        return ast.copy_location(ast.Call(func=_rt(helper), args=[node.func] + node.args,
                                          keywords=node.keywords), node)

    def _is_local(self, expr) -> bool:
        root = _root_name(expr)
        return root is not None and root in self.local

    def _refuse_outer_attribute_stores(self, node, targets) -> None:
        for target in targets:
            for t in ast.walk(target):
                if isinstance(t, ast.Attribute) and isinstance(t.ctx, ast.Store) and \
                        not self._is_local(t.value):
                    raise ScriptError(
                        f"{_where(self.filename, node)}: setting attribute '{t.attr}' of an "
                        "object from outside the function (a parameter, self, a global) is "
                        "not supported by tj.script: it would happen only while the function "
                        "is compiled, not at later calls; return the value instead")

    def visit_Subscript(self, node):
        self.generic_visit(node)
        if not isinstance(node.ctx, ast.Load):
            return node
        return ast.copy_location(_call("sub", node.value, _index(node.slice)), node)

    def visit_IfExp(self, node):
        self.generic_visit(node)
        return ast.copy_location(_call("ifexp", _test(node.test), _thunk(node.body),
                                       _thunk(node.orelse)), node)

    def visit_Assert(self, node):
        self.generic_visit(node)
        return ast.copy_location(ast.Expr(value=_call(
            "assert_", _test(node.test), _thunk(node.msg) if node.msg else _const(None))), node)

    def visit_Raise(self, node):
        self.generic_visit(node)
        return ast.copy_location(ast.Expr(value=_call("raise_", node.exc)), node)

    def visit_If(self, node):
        self.generic_visit(node)
        names = assigned(node.body + node.orelse, self.scope)
        then_f, else_f = self._fresh("then"), self._fresh("else")
        call = _call("if_", _test(node.test), _name(then_f), _name(else_f), _tuple(names),
                     _names(names))
        out = [_def(then_f, names, node.body, names), _def(else_f, names, node.orelse, names)]
        out += _load_maybe(names)
        out.append(_results(names, call))
        return [_at(s, node) for s in out]

    def visit_While(self, node):
        self.generic_visit(node)
        brk = getattr(node, "_tj_break", None)
        names = assigned(node.body, self.scope)
        if brk and brk not in names:
            names.append(brk)
        cond_f, body_f = self._fresh("cond"), self._fresh("body")
        test = _test(node.test)
        if brk:
            test = _call("and_", _thunk(_call("not_", _name(brk))), _thunk(test))
        out = [_def(cond_f, names, [ast.Return(value=test)], None),
               _def(body_f, names, node.body, names)]
        out += _load_maybe(names)
        call = _call("while_", _name(cond_f), _name(body_f), _tuple(names),
                     _names(names))
        out.append(_results(names, call))
        return [_at(s, node) for s in out]

    def visit_For(self, node):
        self.generic_visit(node)
        brk = getattr(node, "_tj_break", None)
        # the loop's target is a variable of the function too: after the loop it holds the
        # last item (or, when the loop ran no iteration, what it held before)
        targets = assigned([ast.Assign(targets=[node.target], value=_const(None))])
        names = targets + [n for n in assigned(node.body, self.scope) if n not in targets]
        if brk and brk not in names:
            names.append(brk)
        body_f = self._fresh("body")
        item = _PREFIX + "item"
        body = [ast.Assign(targets=[node.target], value=_name(item))] + node.body
        out = [_def(body_f, [item] + names, body, names)]
        cond = _const(None)
        if brk:
            cond_f = self._fresh("cond")
            out.append(_def(cond_f, names, [ast.Return(value=_call("not_", _name(brk)))],
                            None))
            cond = _name(cond_f)
        out += _load_maybe(names)
        tail = [_name(body_f), cond, _tuple(names),
                _names(names)]
        it = node.iter
        # `range(...)`: the helper checks at run time that `range` is the builtin
        if isinstance(it, ast.Call) and _is_runtime_call(it) and \
                isinstance(it.args[0], ast.Name) and it.args[0].id == "range" and \
                not it.keywords and 2 <= len(it.args) <= 4:
            call = ast.Call(func=_rt("range_"), args=tail + list(it.args), keywords=[])
        else:
            call = ast.Call(func=_rt("for_each"), args=[node.iter] + tail, keywords=[])
        out.append(_results(names, call))
        return [_at(s, node) for s in out]


# methods that change a Python container in place (list, dict, set, deque, bytearray)
_MUTATORS = frozenset({"append", "extend", "insert", "pop", "remove", "clear", "update",
                       "setdefault", "popitem", "add", "discard", "sort", "reverse",
                       "appendleft", "extendleft", "popleft", "difference_update",
                       "intersection_update", "symmetric_difference_update"})


def _root_name(expr) -> str | None:
    """`a` for `a`, `a.b.c`, `a[i].b`; None for anything else (a call's result)."""
    while isinstance(expr, (ast.Attribute, ast.Subscript)):
        expr = expr.value
    return expr.id if isinstance(expr, ast.Name) else None


def _local_names(fdef: ast.FunctionDef, entry: bool) -> frozenset:
    """The names whose objects the scripted computation made itself (their changes are its
    own): what the function assigns, and, in a function the scripted code calls, its
    parameters other than `self` (the caller made them: a helper appending to its
    caller's list); the parameters of the scripted function itself come from outside."""
    names = set()
    if not entry:
        a = fdef.args
        names.update(p.arg for p in a.posonlyargs + a.args + a.kwonlyargs if p.arg != "self")
        names.update(p.arg for p in (a.vararg, a.kwarg) if p is not None)
    for node in ast.walk(fdef):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.Lambda)) and node is not fdef:
            names.add(getattr(node, "name", ""))
        elif isinstance(node, ast.alias):
            names.add((node.asname or node.name).split(".")[0])
    return frozenset(names)


def _scope_names(fdef: ast.FunctionDef) -> frozenset:
    """The function's own variables: its parameters and the names it assigns (not the
    globals and closure variables it reads)."""
    a = fdef.args
    params = {p.arg for p in a.posonlyargs + a.args + a.kwonlyargs}
    params.update(p.arg for p in (a.vararg, a.kwarg) if p is not None)
    return frozenset(params) | _local_names(fdef, entry=True)


def _plain(expr) -> bool:
    """A name or a chain of attributes of a name: read twice, it gives the same object."""
    while isinstance(expr, ast.Attribute):
        expr = expr.value
    return isinstance(expr, ast.Name)


def _index(expr):
    """An index expression as a value: slices `a:b:c` become `slice(a, b, c)`."""
    if isinstance(expr, ast.Slice):
        return _call("slice_", *[e if e is not None else _const(None)
                                 for e in (expr.lower, expr.upper, expr.step)])
    if isinstance(expr, ast.Tuple):
        return ast.Tuple(elts=[_index(e) for e in expr.elts], ctx=ast.Load())
    return expr


def _at(stmt, node):
    """A generated statement placed on the line of the statement it stands for (one line:
    errors and guards then name the `if`/`while`/`for` line itself)."""
    for n in ast.walk(stmt):
        if "lineno" in n._attributes and not hasattr(n, "lineno"):
            n.lineno = n.end_lineno = node.lineno
            n.col_offset = n.end_col_offset = node.col_offset
    stmt.lineno = stmt.end_lineno = node.lineno
    stmt.col_offset, stmt.end_col_offset = node.col_offset, node.col_offset
    return stmt


def _is_runtime_call(node) -> bool:
    f = node.func
    return isinstance(f, ast.Attribute) and f.attr in ("call", "call_outer") and \
        isinstance(f.value, ast.Name) and f.value.id == RUNTIME


def _refuse_self_calls(fn, fdef: ast.FunctionDef, filename: str) -> None:
    """A function that calls itself would be unrolled without end while it is recorded
    (a branch on a tensor records both paths, the recursive one included)."""
    cells = dict(zip(fn.__code__.co_freevars, fn.__closure__ or ()))
    name = fn.__name__

    def resolves_to_fn() -> bool:
        if name in cells:
            try:
                return cells[name].cell_contents is fn
            except ValueError:  # an empty cell: bound later, to this function or not
                return True
        return fn.__globals__.get(name) is fn

    for node in ast.walk(fdef):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                node.func.id == name and resolves_to_fn():
            raise ScriptError(f"{_where(filename, node)}: {fn.__qualname__} calls itself; "
                              "recursion is not supported by tj.script (it would be "
                              "unrolled without end); write it as a loop, or use tj.trace")


# ---- the whole function ----------------------------------------------------------------------
def source_of(fn) -> tuple[ast.FunctionDef, str]:
    """The function's definition as an ast (with the file's line numbers) and its file."""
    code = fn.__code__
    filename = code.co_filename
    try:
        lines, first = inspect.getsourcelines(fn)
    except (OSError, TypeError) as err:
        raise ScriptError(f"{filename}:{code.co_firstlineno}: the source of "
                          f"{fn.__qualname__} is not available ({err}); tj.script reads "
                          "a function's source") from None
    tree = ast.parse(textwrap.dedent("".join(lines)))
    ast.increment_lineno(tree, first - 1)
    fdef = tree.body[0]
    if not isinstance(fdef, ast.FunctionDef):
        raise ScriptError(f"{filename}:{first}: tj.script compiles functions defined with "
                          "def (a lambda is not)")
    return fdef, filename


def check(fn) -> None:
    """Raise ScriptError for the first construct of `fn` outside the subset."""
    fdef, filename = source_of(fn)
    _Checker(filename).visit(fdef)


def convert(fn, entry: bool = False):
    """The converted twin of the Python function `fn` (same globals, closure cells,
    defaults); its source is `fn.__tj_source__`. `entry`: fn is the scripted function
    (or forward) itself, whose arguments come from outside the scripted code. A
    ScriptError is raised from the user's line it names."""
    try:
        return _convert(fn, entry)
    except ScriptError as err:
        raise_from_line(err, str(err).partition(": ")[0], getattr(fn, "__name__", "?"))


def _convert(fn, entry: bool):
    runtime = _runtime.load()
    fdef, filename = source_of(fn)
    _Checker(filename).visit(fdef)
    fdef.decorator_list = []
    fdef.returns = None
    for a in fdef.args.args + fdef.args.kwonlyargs + fdef.args.posonlyargs:
        a.annotation = None
    if fdef.args.vararg:
        fdef.args.vararg.annotation = None
    if fdef.args.kwarg:
        fdef.args.kwarg.annotation = None
    fdef.args.defaults = [_const(None) for _ in fdef.args.defaults]  # set from fn below
    fdef.args.kw_defaults = [None if d is None else _const(None)
                             for d in fdef.args.kw_defaults]
    _refuse_self_calls(fn, fdef, filename)
    lowering = _Lowering(filename)
    lowering.function(fdef)
    fdef = _Converter(filename, _local_names(fdef, entry), _scope_names(fdef)).visit(fdef)
    # the twin is defined under a name of its own: the function's own name in its body
    # keeps meaning what it means in the original (a global, a closure cell)
    fdef.name = _PREFIX + "converted"
    # a factory whose parameters are the function's free variables and the runtime: the
    # converted function then reads them through the original closure cells
    free = list(fn.__code__.co_freevars)
    factory = _def(_PREFIX + "factory", [RUNTIME] + free, [fdef], None)
    factory.body.append(ast.Return(value=_name(fdef.name)))
    module = ast.Module(body=[factory], type_ignores=[])
    ast.fix_missing_locations(module)
    code = compile(module, filename, "exec")
    namespace: dict = {}
    exec(code, fn.__globals__, namespace)  # noqa: S102 — the user's own source
    inner = namespace[_PREFIX + "factory"].__code__.co_consts
    inner = next(c for c in inner if isinstance(c, types.CodeType) and c.co_name == fdef.name)
    inner = inner.replace(co_name=fn.__name__, co_qualname=fn.__qualname__)  # tracebacks
    cells = dict(zip(fn.__code__.co_freevars, fn.__closure__ or ()))
    closure = tuple(types.CellType(runtime) if name == RUNTIME else cells[name]
                    for name in inner.co_freevars)
    new = types.FunctionType(inner, fn.__globals__, fn.__name__, fn.__defaults__, closure)
    new.__kwdefaults__ = fn.__kwdefaults__
    new.__qualname__ = fn.__qualname__
    new.__module__ = fn.__module__
    fdef.name = fn.__name__
    new.__tj_source__ = ast.unparse(fdef)
    return new
