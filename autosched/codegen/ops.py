"""LLVM instructions of expressions, for the scalar and the vector code generators alike.

Each works on scalars and on vectors: constants take the shape of the operands
they meet and intrinsics are declared for the operands' type, so an operator
or a math function is emitted one way whether a loop is vectorized or not
(:func:`binary`, :func:`call`); the generators differ only in how they get
their operands.
"""

from __future__ import annotations

from collections.abc import Callable

import llvmlite.ir as ir

from autosched.errors import CodegenError
from autosched.te import expr as E
from autosched.te.expr import DTYPE_BYTES, Expr, IntImm, is_float
from autosched.tir import stmt as S
from autosched.tir.arith import simplify

I1, I8, I32, I64 = ir.IntType(1), ir.IntType(8), ir.IntType(32), ir.IntType(64)
PTR = ir.PointerType()
VOID = ir.VoidType()

_TYPES = {
    "float32": ir.FloatType(),
    "float64": ir.DoubleType(),
    "float16": ir.HalfType(),
    "int8": I8,
    "uint8": I8,
    "int16": ir.IntType(16),
    "uint16": ir.IntType(16),
    "int32": I32,
    "uint32": I32,
    "int64": I64,
    "uint64": I64,
    "bool": I1,
}


def ltype(dtype: str, in_memory: bool = False) -> ir.Type:
    """The LLVM type of ``dtype`` (a bool in memory is a byte)."""
    if dtype == "bool" and in_memory:
        return I8
    try:
        return _TYPES[dtype]
    except KeyError:
        raise CodegenError(f"dtype {dtype} is not supported by the LLVM backend") from None


def flat_index(buf: S.Buffer, indices) -> Expr:
    """Row-major offset of ``indices`` in ``buf``."""
    if len(indices) != len(buf.shape):
        raise CodegenError(f"buffer '{buf.name}' has {len(buf.shape)} dimensions, indexed with {len(indices)}")
    if buf.strides is not None:  # padded or strided memory
        flat = buf.elem_offset if buf.elem_offset is not None else IntImm(0)
        for i, st in zip(indices, buf.strides):
            flat = flat + i * st
        return simplify(flat)
    if not indices:
        return buf.elem_offset if buf.elem_offset is not None else IntImm(0)
    flat: Expr = indices[0]
    for d in range(1, len(indices)):
        flat = flat * buf.shape[d] + indices[d]
    return simplify(flat if buf.elem_offset is None else flat + buf.elem_offset)


#: math functions that are LLVM intrinsics (``llvm.exp.f32``, ``llvm.sqrt.v16f32``)
LLVM_INTRINSICS = {"exp", "log", "sqrt", "fabs", "floor", "ceil", "nearbyint", "pow", "sin", "cos"}
#: math functions called from libm: (float32 name, float64 name)
LIBM = {"tanh": ("tanhf", "tanh"), "erf": ("erff", "erf")}
_ARITH = {E.Add: "+", E.Sub: "-", E.Mul: "*", E.Div: "/"}


def const(ty: ir.Type, v) -> ir.Constant:
    """``v`` as a constant of ``ty``, splatted over the lanes when ``ty`` is a vector."""
    if isinstance(ty, ir.VectorType):
        return ir.Constant(ty, [v] * ty.count)
    return ir.Constant(ty, v)


def shaped(like: ir.Type, elem: ir.Type) -> ir.Type:
    """``elem``, or a vector of it with as many lanes as ``like``."""
    return ir.VectorType(elem, like.count) if isinstance(like, ir.VectorType) else elem


def unsigned(dtype: str) -> bool:
    return dtype.startswith("uint") or dtype == "bool"


def arith(b: ir.IRBuilder, op: str, x: ir.Value, y: ir.Value, dtype: str) -> ir.Value:
    """``+ - * /``: floats allow FMA contraction, integers are index arithmetic without overflow (nsw)."""
    if is_float(dtype):
        ins = {"+": b.fadd, "-": b.fsub, "*": b.fmul, "/": b.fdiv}[op](x, y)
        ins.flags.append("contract")
        return ins
    if op == "/":
        raise CodegenError("integer '/' has no meaning here; use // (floor division)")
    return {"+": b.add, "-": b.sub, "*": b.mul}[op](x, y, flags=["nsw"])


def _floor_adjust(b: ir.IRBuilder, r: ir.Value, y: ir.Value) -> ir.Value:
    """True where a truncating remainder is non-zero with the opposite sign of the divisor."""
    zero = const(r.type, 0)
    return b.and_(b.icmp_signed("!=", r, zero), b.icmp_signed("<", b.xor(r, y), zero))


def floordiv(b: ir.IRBuilder, x: ir.Value, y: ir.Value, dtype: str, divisor: int | None) -> ir.Value:
    """Floor division (Python's ``//``); a shift for positive powers of two."""
    if unsigned(dtype):
        return b.udiv(x, y)
    if divisor is not None and divisor > 0 and divisor & (divisor - 1) == 0:
        return b.ashr(x, const(x.type, divisor.bit_length() - 1))
    q = b.sdiv(x, y)
    return b.sub(q, b.zext(_floor_adjust(b, b.srem(x, y), y), x.type))


def floormod(b: ir.IRBuilder, x: ir.Value, y: ir.Value, dtype: str, divisor: int | None) -> ir.Value:
    """Floor modulo (Python's ``%``, the sign of the divisor); a mask for positive powers of two."""
    if unsigned(dtype):
        return b.urem(x, y)
    if divisor is not None and divisor > 0 and divisor & (divisor - 1) == 0:
        return b.and_(x, const(x.type, divisor - 1))
    r = b.srem(x, y)
    return b.select(_floor_adjust(b, r, y), b.add(r, y), r)


def compare(b: ir.IRBuilder, op: str, x: ir.Value, y: ir.Value, dtype: str) -> ir.Value:
    if is_float(dtype):
        return b.fcmp_ordered(op, x, y) if op != "!=" else b.fcmp_unordered(op, x, y)
    if unsigned(dtype):
        return b.icmp_unsigned(op, x, y)
    return b.icmp_signed(op, x, y)


def cast(b: ir.IRBuilder, v: ir.Value, src: str, dst: str, dst_type: ir.Type) -> ir.Value:
    """Convert ``v`` from dtype ``src`` to ``dst`` (``dst_type`` is its LLVM element type)."""
    if src == dst:
        return v
    dt = shaped(v.type, dst_type)
    if dst == "bool":
        if is_float(src):
            return b.fcmp_unordered("!=", v, const(v.type, 0.0))
        return b.icmp_unsigned("!=", v, const(v.type, 0))
    if is_float(src) and is_float(dst):
        return b.fpext(v, dt) if DTYPE_BYTES[dst] > DTYPE_BYTES[src] else b.fptrunc(v, dt)
    if is_float(src):
        return b.fptoui(v, dt) if unsigned(dst) else b.fptosi(v, dt)
    if is_float(dst):
        return b.uitofp(v, dt) if unsigned(src) else b.sitofp(v, dt)
    sw = (v.type.element if isinstance(v.type, ir.VectorType) else v.type).width
    if dst_type.width == sw:
        return v
    if dst_type.width < sw:
        return b.trunc(v, dt)
    return b.zext(v, dt) if unsigned(src) else b.sext(v, dt)


#: integer operators folded when both operands are constants (unrolled loop indices): Python's ``//`` and
#: ``%`` are the IR's floor division and modulo
_FOLD = {E.Add: lambda a, b: a + b, E.Sub: lambda a, b: a - b, E.Mul: lambda a, b: a * b,
         E.FloorDiv: lambda a, b: a // b if b else None, E.FloorMod: lambda a, b: a % b if b else None,
         E.Min: min, E.Max: max, E.LT: lambda a, b: a < b, E.LE: lambda a, b: a <= b,
         E.GT: lambda a, b: a > b, E.GE: lambda a, b: a >= b, E.EQ: lambda a, b: a == b,
         E.NE: lambda a, b: a != b, E.And: lambda a, b: a and b, E.Or: lambda a, b: a or b,
         E.BitAnd: lambda a, b: a & b, E.BitOr: lambda a, b: a | b, E.BitXor: lambda a, b: a ^ b,
         E.ShiftLeft: lambda a, b: a << b if 0 <= b < 64 else None,
         E.ShiftRight: lambda a, b: a >> b if b >= 0 else None}


def fold(e: E.BinaryOp, x: ir.Value, y: ir.Value) -> ir.Constant | None:
    """``e`` as a constant when both operands are integer constants, else None. Unrolled copies of a loop
    body would otherwise emit their index arithmetic on constants (``mul 2, 56``) for LLVM to fold, which
    costs time in Python and in LLVM."""
    if not (isinstance(x, ir.Constant) and isinstance(y, ir.Constant) and isinstance(x.type, ir.IntType)
            and isinstance(x.constant, int) and isinstance(y.constant, int)):
        return None
    op = _FOLD.get(type(e))
    if op is None or is_float(e.a.dtype) or (unsigned(e.a.dtype) and e.a.dtype != "bool"):
        return None
    v = op(x.constant, y.constant)
    if v is None:
        return None
    if isinstance(v, bool) or type(e) in (E.And, E.Or) or isinstance(e, E.CmpOp):
        return ir.Constant(I1, int(bool(v)))
    width = x.type.width
    if not -(1 << (width - 1)) <= v < (1 << (width - 1)):
        return None  # would wrap: leave it to the instruction
    return ir.Constant(x.type, v)


def concat(b: ir.IRBuilder, vectors: list[ir.Value]) -> ir.Value:
    """The vectors (of one type) end to end as one vector, joined pairwise; undefined vectors pad their count
    to a power of two (their lanes come last)."""
    vecs = list(vectors)
    while len(vecs) & (len(vecs) - 1):
        vecs.append(ir.Constant(vecs[0].type, ir.Undefined))
    while len(vecs) > 1:
        n = vecs[0].type.count
        both = ir.Constant(ir.VectorType(ir.IntType(32), 2 * n), list(range(2 * n)))
        vecs = [b.shuffle_vector(vecs[i], vecs[i + 1], both) for i in range(0, len(vecs), 2)]
    return vecs[0]


def binary(b: ir.IRBuilder, e: E.BinaryOp, x: ir.Value, y: ir.Value) -> ir.Value:
    """The value of ``e`` (arithmetic, min/max, a comparison, and/or, bit operators) from its operands' values
    ``x`` and ``y`` (both scalars, or both vectors of the same lanes)."""
    folded = fold(e, x, y)
    if folded is not None:
        return folded
    kind, dtype = type(e), e.a.dtype
    if kind in _ARITH:
        if kind is E.Div and not is_float(dtype):
            raise CodegenError(f"integer '/' in {e}; use // (floor division)")
        return arith(b, _ARITH[kind], x, y, dtype)
    divisor = e.b.value if isinstance(e.b, IntImm) else None
    if kind is E.FloorDiv:
        return floordiv(b, x, y, e.dtype, divisor)
    if kind is E.FloorMod:
        return floormod(b, x, y, e.dtype, divisor)
    if kind in (E.Min, E.Max):
        if is_float(dtype):
            return float_minmax(b, x, y, kind is E.Min)
        return b.call(_decl(b, minmax_intrinsic(dtype, kind is E.Min), x.type, 2), [x, y])
    if isinstance(e, E.CmpOp):
        return compare(b, e.symbol, x, y, dtype)
    if kind in (E.And, E.BitAnd):
        return b.and_(x, y)
    if kind in (E.Or, E.BitOr):
        return b.or_(x, y)
    if kind is E.BitXor:
        return b.xor(x, y)
    if kind is E.ShiftLeft:
        return b.shl(x, y)
    if kind is E.ShiftRight:
        return b.lshr(x, y) if unsigned(dtype) else b.ashr(x, y)
    raise CodegenError(f"cannot generate code for expression {kind.__name__}: {e}")


def logical_not(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """``!x`` of booleans (i1 or vectors of i1)."""
    return b.xor(x, const(x.type, 1))


def float_minmax(b: ir.IRBuilder, x: ir.Value, y: ir.Value, is_min: bool) -> ir.Value:
    """min/max of floats with NaN propagating from either side, as numpy's: ``llvm.minimum``/``maximum`` with
    ``nsz`` (-0 and +0 unordered, as numpy leaves them): x86 gives a max, a NaN test and a blend instead of six
    instructions in a longer chain per reduction step (a softmax's row max). One call, not compares and selects:
    a fully unrolled chain of those, each step reading the last three times, hung LLVM's optimiser."""
    return b.call(_decl(b, "llvm.minimum" if is_min else "llvm.maximum", x.type, 2), [x, y], fastmath=("nsz",))


def minmax_intrinsic(dtype: str, is_min: bool) -> str:
    """The LLVM intrinsic for min/max of integer ``dtype`` values: llvm.smin/umax/..."""
    if unsigned(dtype):
        return "llvm.umin" if is_min else "llvm.umax"
    return "llvm.smin" if is_min else "llvm.smax"


def call(b: ir.IRBuilder, name: str, dtype: str, args: list[ir.Value], avx512: bool = False) -> ir.Value:
    """The math function ``name`` of ``dtype`` values (scalars or vectors): LLVM intrinsics on the arguments'
    type, except float32 ``exp``, ``tanh`` and ``erf`` of a vector, inline (:data:`INLINE_F32`; LLVM or libm
    would take one call per lane, while a scalar keeps libm's ``expf``, ``tanhf``, ``erff``); libm's ``tanh``
    and ``erf`` of float64 called once per lane. ``avx512``: the target has AVX-512's instructions (exp uses
    one of them)."""
    ty = args[0].type if args else None
    if name == "reinterpret":  # the same bits as another type of the same width
        target = ltype(dtype)
        return b.bitcast(args[0], ir.VectorType(target, ty.count) if isinstance(ty, ir.VectorType) else target)
    if name == "popcount":  # an integer intrinsic: no fast-math flags
        return b.call(_decl(b, "llvm.ctpop", ty, 1), args)
    if name in INLINE_F32 and dtype == "float32" and isinstance(ty, ir.VectorType):
        return INLINE_F32[name](b, args[0], avx512)
    if name in LLVM_INTRINSICS:
        ins = b.call(_decl(b, f"llvm.{name}", ty, len(args)), args)
        ins.flags.append("contract")
        return ins
    if name in LIBM:
        if dtype not in ("float32", "float64"):
            raise CodegenError(f"{name} is not available for {dtype} (float32 and float64 only)")
        elem = ty.element if isinstance(ty, ir.VectorType) else ty
        mod = b.module
        fname = LIBM[name][0 if dtype == "float32" else 1]
        fn = mod.globals.get(fname) or ir.Function(mod, ir.FunctionType(elem, [elem]), name=fname)
        if not isinstance(ty, ir.VectorType):
            return b.call(fn, args)
        out = ir.Constant(ty, ir.Undefined)
        for lane in range(ty.count):
            li = ir.Constant(I32, lane)
            out = b.insert_element(out, b.call(fn, [b.extract_element(args[0], li)]), li)
        return out
    raise CodegenError(f"unknown intrinsic {name}")


#: the packed dot products (``te.expr.PACKED_DOTS``): intrinsic -> (the operands' dtypes, elements per word)
DOTS = E.PACKED_DOTS
#: ``dot4_u8s8(acc, a, w)``: one VNNI vpdpbusd on 16 int32 lanes
DOT4_U8S8 = "dot4_u8s8"
#: ``dot2_i16(acc, a, w)``: one ``pmaddwd`` and an add per vector of int32 lanes on any x86 CPU
DOT2_I16 = "dot2_i16"


def accumulated_dot(e: E.Expr) -> E.Call | None:
    """``acc + dot(0, a, w)`` (a reduction's update, either order; ``dot`` one of :data:`DOTS`) as
    ``dot(acc, a, w)``, which the vector instructions accumulate in place; else None."""
    if not isinstance(e, E.Add):
        return None
    for acc, call in ((e.a, e.b), (e.b, e.a)):
        if isinstance(call, E.Call) and call.name in DOTS and isinstance(call.args[0], E.IntImm) and \
                call.args[0].value == 0:
            return E.Call(call.dtype, call.name, [acc, *call.args[1:]])
    return None


def packed_dot(b: ir.IRBuilder, name: str, acc: ir.Value, a: ir.Value, w: ir.Value, vnni: bool = False) -> ir.Value:
    """The intrinsic ``name`` of :data:`DOTS` on its operands' words (int32 scalars or vectors)."""
    return dot4_u8s8(b, acc, a, w, vnni) if name == DOT4_U8S8 else dot2_i16(b, acc, a, w)


def dot4_u8s8(b: ir.IRBuilder, acc: ir.Value, a: ir.Value, w: ir.Value, vnni: bool = False) -> ir.Value:
    """``acc`` plus, lane by lane, the sum of the products of the 4 uint8 bytes of ``a``'s 32-bit lane with the
    4 int8 bytes of ``w``'s (scalars or vectors of int32: the words the operands' bytes make). ``vnni``: 16 lanes
    are one AVX-512 VNNI ``vpdpbusd``; otherwise the bytes are widened, multiplied and each lane's four products
    added (exact, but dozens of widenings and shuffles per vector on AVX2: CPUs without VNNI take
    :func:`dot2_i16`)."""
    ty = acc.type
    if vnni and isinstance(ty, ir.VectorType) and ty.count == 16:
        name = "llvm.x86.avx512.vpdpbusd.512"
        fn = b.module.globals.get(name) or ir.Function(b.module, ir.FunctionType(ty, [ty, ty, ty]), name=name)
        return b.call(fn, [acc, a, w])
    return _widened_dot(b, acc, a, w, 4, I8, (b.zext, b.sext))


def dot2_i16(b: ir.IRBuilder, acc: ir.Value, a: ir.Value, w: ir.Value) -> ir.Value:
    """``acc`` plus, lane by lane, ``a.lo * w.lo + a.hi * w.hi`` of the int16 halves of the 32-bit lanes: written
    as sign extensions, products and the sum of even and odd products, which LLVM's x86 backend selects as one
    ``pmaddwd`` per vector register (exact: two int16 products fit an int32)."""
    return _widened_dot(b, acc, a, w, 2, ir.IntType(16), (b.sext, b.sext))


def _widened_dot(b: ir.IRBuilder, acc: ir.Value, a: ir.Value, w: ir.Value, k: int, elem: ir.IntType,
                 widen: tuple) -> ir.Value:
    """``acc`` plus each 32-bit lane's sum of the ``k`` products of its ``elem`` parts, widened to int32."""
    ty = acc.type
    n = ty.count if isinstance(ty, ir.VectorType) else 1
    wide = ir.VectorType(I32, k * n)
    products = b.mul(widen[0](b.bitcast(a, ir.VectorType(elem, k * n)), wide),
                     widen[1](b.bitcast(w, ir.VectorType(elem, k * n)), wide))
    if not isinstance(ty, ir.VectorType):
        name = f"llvm.vector.reduce.add.v{k * n}i32"
        fn = b.module.globals.get(name) or ir.Function(b.module, ir.FunctionType(I32, [wide]), name=name)
        return b.add(acc, b.call(fn, [products]))
    parts = [b.shuffle_vector(products, ir.Constant(wide, ir.Undefined),
                              ir.Constant(ir.VectorType(I32, n), [k * j + t for j in range(n)])) for t in range(k)]
    total = parts[0]  # lane j sums products k j .. k j + k - 1 (the pairs' sum first: the pmaddwd pattern)
    for part in parts[1:]:
        total = b.add(total, part)
    return b.add(acc, total)


def branch(cg, cond: ir.Value, then_fn: Callable[[], ir.Value | None],
           else_fn: Callable[[], ir.Value | None] | None = None, name: str = "if") -> ir.Value | None:
    """``if cond then_fn() else else_fn()`` as basic blocks; a phi of their values when both return one. A
    constant ``cond`` (decided by unrolled loops) emits only the arm it takes. Values ``cg`` reuses
    (``cg.scoped``) do not leave the arm that computed them: they would not dominate the join."""
    if isinstance(cond, ir.Constant) and isinstance(cond.constant, int):
        if cond.constant:
            return then_fn()
        return else_fn() if else_fn is not None else None
    b = cg.b
    fn = cg.cur.fn
    bt = fn.append_basic_block(cg._name(f"{name}_then"))
    bj = fn.append_basic_block(cg._name(f"{name}_end"))
    be = fn.append_basic_block(cg._name(f"{name}_else")) if else_fn is not None else bj
    b.cbranch(cond, bt, be)
    b.position_at_end(bt)
    with cg.scoped():
        vt = then_fn()
    end_t = b.block
    b.branch(bj)
    vf = end_f = None
    if else_fn is not None:
        b.position_at_end(be)
        with cg.scoped():
            vf = else_fn()
        end_f = b.block
        b.branch(bj)
    b.position_at_end(bj)
    if isinstance(vt, ir.Value) and isinstance(vf, ir.Value) and not isinstance(vt.type, ir.VoidType):
        phi = b.phi(vt.type)
        phi.add_incoming(vt, end_t)
        phi.add_incoming(vf, end_f)
        return phi
    return None


#: exp's argument range when 2^n is applied by AVX-512's ``vscalefps``: e^89 overflows to inf; below -126 ln2
#: the result is 0 by a select, since a subnormal or underflowing product costs Intel cores a microcode
#: assist per vector (letting vscalefps underflow made a causal softmax, its masked scores the lowest float,
#: 4x slower)
SCALEF_RANGE = (-87.33654022216797, 89.0)


def exp_f32(b: ir.IRBuilder, x: ir.Value, avx512: bool = False) -> ir.Value:
    """``exp`` of float32 values inline (LLVM turns ``llvm.exp`` on a vector into one libm call per lane):
    ``2^n * p(r)`` with ``x = n ln2 + r``, ``|r| <= ln2 / 2``, ``ln2`` split in two for an exact ``r``, and
    Cephes' degree-6 polynomial for ``e^r`` (about 1 ulp). Overflow gives inf, underflow 0, NaN stays NaN.
    ``avx512`` (16-lane vectors on an AVX-512 target): ``vscalefps`` applies 2^n and overflow in one
    instruction instead of six (a softmax spends most of its time in exp)."""
    fty, ity = x.type, shaped(x.type, ir.IntType(32))
    fma_fn = _decl(b, "llvm.fma", fty, 3)
    fma = lambda p, q, r: b.call(fma_fn, [p, q, r])  # noqa: E731
    c = lambda v: const(fty, v)  # noqa: E731
    floor = _decl(b, "llvm.floor", fty)
    scalef = avx512 and isinstance(fty, ir.VectorType) and fty.count == 16 and isinstance(fty.element, ir.FloatType)
    x_in = x
    if scalef:  # clamped with NaN passing through (x86's max/min give their second operand when one is NaN)
        lo, hi = SCALEF_RANGE
        x = b.select(b.fcmp_ordered(">", c(lo), x), c(lo), x)
        x = b.select(b.fcmp_ordered("<", c(hi), x), c(hi), x)
    n = b.call(floor, [fma(x, c(1.44269504088896341), c(0.5))])
    r = fma(n, c(-0.693359375), x)
    r = fma(n, c(2.12194440e-4), r)
    p = c(1.9875691500e-4)
    for k in (1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1):
        p = fma(p, r, c(k))
    p = fma(p, b.fmul(r, r), b.fadd(r, c(1.0)))
    if scalef:
        fn = b.module.globals.get("llvm.x86.avx512.mask.scalef.ps.512") or ir.Function(
            b.module, ir.FunctionType(fty, [fty, fty, fty, ir.IntType(16), I32]),
            name="llvm.x86.avx512.mask.scalef.ps.512")
        out = b.call(fn, [p, n, ir.Constant(fty, ir.Undefined), ir.Constant(ir.IntType(16), -1), ir.Constant(I32, 4)])
        return b.select(b.fcmp_ordered("<", x_in, c(SCALEF_RANGE[0])), c(0.0), out)
    # 2^n as float bits, n clamped so that the exponent field stays valid; the selects below cover the rest
    ni = b.fptosi(b.call(_decl(b, "llvm.maxnum", fty, 2), [b.call(_decl(b, "llvm.minnum", fty, 2), [n, c(127.0)]),
                                                          c(-126.0)]), ity)
    scale = b.bitcast(b.shl(b.add(ni, const(ity, 127)), const(ity, 23)), fty)
    out = b.fmul(p, scale)
    # n = 128 (x in [127.5 ln2, ln FLT_MAX]: finite results) is clamped to 127 above; its missing factor of 2
    out = b.fmul(out, b.select(b.fcmp_ordered(">", n, c(127.0)), c(2.0), c(1.0)))
    out = b.select(b.fcmp_ordered(">", x, c(88.72283935546875)), c(float("inf")), out)
    return b.select(b.fcmp_ordered("<", x, c(-87.33654022216797)), c(0.0), out)


def _horner(b: ir.IRBuilder, coeffs: tuple[float, ...], t: ir.Value) -> ir.Value:
    """The polynomial with ``coeffs`` (highest degree first) at ``t``, by multiply-adds (fused where the target
    has FMA; ``llvm.fmuladd`` never becomes a libm call on a CPU without it)."""
    fma = _decl(b, "llvm.fmuladd", t.type, 3)
    p = const(t.type, coeffs[0])
    for k in coeffs[1:]:
        p = b.call(fma, [p, t, const(t.type, k)])
    return p


#: erf(x) = x P(x^2) / Q(x^2) on |x| <= 4 (erf(4) rounds to 1 in float32), coefficients highest degree first,
#: fitted to erf's relative error by least squares: within 4.4e-7 (7 ulp) in float32 arithmetic
ERF_P = (-3.7884348103034426e-08, 9.913301255437545e-06, 0.0005538858822546899, 0.0033050100319087505,
         0.055095698684453964, 0.15735866129398346, 1.128379225730896)
ERF_Q = (0.00011289012763882056, 0.0014334878651425242, 0.014956456609070301, 0.10641168802976608,
         0.47279104590415955, 1.0)
#: tanh(x) = x + x^3 P(x^2) for |x| < 0.625, fitted so: within 1e-7 relative in float32 arithmetic
TANH_P = (-0.005798169877380133, 0.020720338448882103, -0.05376381799578667, 0.13331718742847443,
          -0.33333292603492737)


def erf_f32(b: ir.IRBuilder, x: ir.Value, avx512: bool = False) -> ir.Value:
    """``erf`` of float32 values inline: the rational approximation :data:`ERF_P` / :data:`ERF_Q` of the
    argument clamped to [-4, 4] (a GELU's erf was one libm call per element: 6 ns each). NaN stays NaN."""
    fty = x.type
    lo = b.call(_decl(b, "llvm.maxnum", fty, 2), [b.call(_decl(b, "llvm.minnum", fty, 2), [x, const(fty, 4.0)]),
                                                 const(fty, -4.0)])
    t = b.fmul(lo, lo)
    y = b.fdiv(b.fmul(lo, _horner(b, ERF_P, t)), _horner(b, ERF_Q, t))
    return b.select(b.fcmp_unordered("uno", x, x), x, y)


def tanh_f32(b: ir.IRBuilder, x: ir.Value, avx512: bool = False) -> ir.Value:
    """``tanh`` of float32 values inline: ``x + x^3 P(x^2)`` (:data:`TANH_P`) below 0.625 in magnitude, where
    ``1 - 2 / (e^{2|x|} + 1)`` would cancel; that (by :func:`exp_f32`, sign restored) above. +-inf give +-1,
    NaN stays NaN."""
    fty = x.type
    a = b.call(_decl(b, "llvm.fabs", fty), [x])
    t = b.fmul(x, x)
    small = b.call(_decl(b, "llvm.fmuladd", fty, 3), [b.fmul(x, t), _horner(b, TANH_P, t), x])
    e = exp_f32(b, b.fadd(a, a), avx512)
    big = b.fsub(const(fty, 1.0), b.fdiv(const(fty, 2.0), b.fadd(e, const(fty, 1.0))))
    y = b.select(b.fcmp_ordered("<", a, const(fty, 0.625)), small, big)
    return b.call(_decl(b, "llvm.copysign", fty, 2), [y, x])  # odd: the sign of x, -0 included


#: log(1 + f) = f - f^2 / 2 + f^3 P(f) for f in [sqrt(1/2) - 1, sqrt(2) - 1] (Cephes' logf), highest degree first
LOG_P = (7.0376836292e-2, -1.1514610310e-1, 1.1676998740e-1, -1.2420140846e-1, 1.4249322787e-1, -1.6668057665e-1,
         2.0000714765e-1, -2.4999993993e-1, 3.3333331174e-1)


def log_f32(b: ir.IRBuilder, x: ir.Value, avx512: bool = False) -> ir.Value:
    """``log`` of float32 values inline (a softplus or Mish took one libm call per element): ``x = 2^e m``
    with ``m`` in [sqrt(1/2), sqrt(2)) from the float's bits, ``log m`` by :data:`LOG_P`, ``e ln2`` added in two
    parts; subnormals are scaled by 2^23 first. 0 gives -inf, inf inf, negatives and NaN NaN."""
    fty, ity = x.type, shaped(x.type, ir.IntType(32))
    c = lambda v: const(fty, v)  # noqa: E731
    ci = lambda v: const(ity, v)  # noqa: E731
    tiny = b.fcmp_ordered("<", x, c(1.1754943508222875e-38))
    xs = b.select(tiny, b.fmul(x, c(8388608.0)), x)
    bits = b.bitcast(xs, ity)
    e = b.sub(b.ashr(bits, ci(23)), b.select(tiny, ci(126 + 23), ci(126)))
    m = b.bitcast(b.or_(b.and_(bits, ci(0x007FFFFF)), ci(0x3F000000)), fty)  # in [0.5, 1)
    low = b.fcmp_ordered("<", m, c(0.707106781186547524))
    e = b.sub(e, b.zext(low, ity))
    f = b.fsub(b.select(low, b.fadd(m, m), m), c(1.0))  # in [sqrt(1/2) - 1, sqrt(2) - 1)
    ef = b.sitofp(e, fty)
    fma = _decl(b, "llvm.fmuladd", fty, 3)
    z = b.fmul(f, f)
    y = b.fmul(b.fmul(f, z), _horner(b, LOG_P, f))
    y = b.call(fma, [ef, c(-2.12194440e-4), y])
    y = b.call(fma, [z, c(-0.5), y])
    out = b.call(fma, [ef, c(0.693359375), b.fadd(f, y)])
    out = b.select(b.fcmp_ordered("==", x, c(float("inf"))), x, out)
    out = b.select(b.fcmp_ordered("==", x, c(0.0)), c(float("-inf")), out)
    return b.select(b.fcmp_unordered("<", x, c(0.0)), c(float("nan")), out)  # negatives, and NaN itself


#: float32 math of vectors emitted inline instead of a call per lane, as ``fn(builder, x, avx512)``
INLINE_F32 = {"exp": exp_f32, "erf": erf_f32, "tanh": tanh_f32, "log": log_f32}


def _decl(b: ir.IRBuilder, name: str, ty: ir.Type, nargs: int = 1) -> ir.Function:
    """An LLVM intrinsic on ``ty`` (scalar or vector), declared once per module."""
    full = f"{name}.{type_suffix(ty)}"
    mod = b.module
    fn = mod.globals.get(full)
    if fn is None:
        fn = ir.Function(mod, ir.FunctionType(ty, [ty] * nargs), name=full)
    return fn


def type_suffix(ty: ir.Type) -> str:
    """The type part of an overloaded intrinsic's name: ``f32``, ``v16f32``, ``i64``."""
    if isinstance(ty, ir.VectorType):
        return f"v{ty.count}{type_suffix(ty.element)}"
    if isinstance(ty, ir.FloatType):
        return "f32"
    if isinstance(ty, ir.DoubleType):
        return "f64"
    if isinstance(ty, ir.HalfType):
        return "f16"
    return f"i{ty.width}"
