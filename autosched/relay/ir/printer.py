"""A readable text form of relay expressions (SSA lines, types as comments, constants summarised); importing it
gives ``Expr`` and ``IRModule`` their ``astext()`` and ``str()`` (the ir package imports it with expr)."""

from __future__ import annotations

from autosched.relay.ir.expr import Call, Constant, Expr, Function, IRModule, Tuple, TupleGetItem, Var, post_order


def _attrs(attrs: dict) -> str:
    return "".join(f", {k}={list(v) if isinstance(v, tuple) else v}" for k, v in attrs.items() if v is not None)


def _ty(e: Expr) -> str:
    t = e._checked_type
    return f" /* ty={t!r} */" if t is not None else ""


def astext(expr: Expr, indent: str = "") -> str:
    """``fn (%x: Tensor[...]) { %0 = op(...); ... }`` for a Function, the same body form for other exprs."""
    names: dict[int, str] = {}
    lines: list[str] = []
    counter = 0
    consts = 0
    body = expr.body if isinstance(expr, Function) else expr
    params = expr.params if isinstance(expr, Function) else ()
    for p in params:
        names[id(p)] = f"%{p.name_hint}"
    for node in post_order(body):
        if id(node) in names:
            continue
        if isinstance(node, Var):
            names[id(node)] = f"%{node.name_hint}"
        elif isinstance(node, Constant):
            if node.data.ndim == 0:
                names[id(node)] = f"{node.data.item()!r}{'f' if node.data.dtype.kind == 'f' else ''}"
            else:
                names[id(node)] = f"meta[Constant][{consts}]"
                consts += 1
        elif isinstance(node, Function):
            continue
        else:
            if isinstance(node, Call):
                if isinstance(node.op, Function) and node.op.attrs.get("global_symbol"):
                    callee = f"@{node.op.attrs['global_symbol']}"  # a global: printed with the module
                elif isinstance(node.op, Function):
                    sub = astext(node.op, indent + "  ")
                    lines.append(f"{indent}  %{counter} = {sub};")
                    callee = f"%{counter}"
                    counter += 1
                else:
                    callee = node.op.name
                rhs = f"{callee}({', '.join(names[id(a)] for a in node.args)}{_attrs(node.attrs)})"
                if node.compiler:
                    rhs += f" /* compiler={node.compiler} */"
            elif isinstance(node, Tuple):
                rhs = f"({', '.join(names[id(a)] for a in node.fields)})"
            elif isinstance(node, TupleGetItem):
                rhs = f"{names[id(node.tuple_value)]}.{node.index}"
            else:
                rhs = repr(node)
            lines.append(f"{indent}  %{counter} = {rhs};{_ty(node)}")
            names[id(node)] = f"%{counter}"
            counter += 1
    head = ", ".join(f"%{p.name_hint}: {p.type_annotation!r}" for p in params)
    fattrs = expr.attrs if isinstance(expr, Function) else {}
    prim = " /* primitive */" if fattrs.get("Primitive") else ""
    if fattrs.get("Composite"):
        prim = f" /* Composite={fattrs['Composite']} */"
    if fattrs.get("Compiler"):
        prim = f" /* Compiler={fattrs['Compiler']} */"
    out = names.get(id(body), "?")
    return f"fn ({head}){prim} {{\n" + "\n".join(lines) + ("\n" if lines else "") + f"{indent}  {out}\n{indent}}}"


def module_astext(mod: IRModule, show_meta_data: bool = True, annotate: object = None) -> str:
    """``def @main(...) { ... }`` for each global function of ``mod`` (TVM's keywords accepted: constants are
    always summarised as ``meta[Constant][k]``)."""
    return "\n".join(f"def @{name}" + astext(f)[2:] for name, f in mod.functions.items())


Expr.astext = astext  # type: ignore[attr-defined]
Expr.__str__ = astext  # type: ignore[method-assign]
IRModule.astext = module_astext  # type: ignore[attr-defined]
IRModule.__str__ = module_astext  # type: ignore[method-assign]
