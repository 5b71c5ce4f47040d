"""Bring your own codegen: patterns, MergeComposite / AnnotateTarget / PartitionGraph, the ccompiler target,
external functions in relay.build, the exported library and the tuning boundary."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys

import numpy as np
import pytest

from autosched import relay
from autosched.relay import transform
from autosched.relay.dataflow_pattern import is_constant, is_op, is_var, wildcard
from autosched.relay.transform.partition import external_functions, partition_for
from autosched.runtime import graph_executor, register_func, remove_global_func

RNG = np.random.default_rng(12)


def rand(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype("float32")


def conv_tail() -> relay.dataflow_pattern.DFPattern:
    """conv2d with constant weights, an optional bias and an optional relu (as ccompiler's table has it)."""
    conv = is_op("nn.conv2d")(wildcard(), is_constant())
    conv = conv.optional(lambda x: is_op("nn.bias_add")(x, is_constant()))
    return conv.optional(is_op("nn.relu"))


def small_cnn(pool: bool = True) -> tuple[relay.IRModule, dict]:
    """conv+bias+relu -> conv(+relu) -> max_pool (unsupported by ccompiler) -> dense+bias -> * 0.5 + skip."""
    x = relay.var("data", shape=(1, 3, 12, 12))
    w1, b1, w2, fw, fb = (relay.var(n, shape=s) for n, s in
                          [("w1", (8, 3, 3, 3)), ("b1", (8,)), ("w2", (8, 8, 3, 3)), ("fw", (10, 8 * 6 * 6 if pool
                                                                                                 else 8 * 12 * 12)),
                           ("fb", (10,))])
    y = relay.nn.relu(relay.nn.bias_add(relay.nn.conv2d(x, w1, padding=(1, 1)), b1))
    y = relay.nn.relu(relay.nn.conv2d(y, w2, padding=(1, 1)))
    if pool:
        y = relay.nn.max_pool2d(y, pool_size=(2, 2), strides=(2, 2))
    y = relay.nn.batch_flatten(y)
    d = relay.nn.bias_add(relay.nn.dense(y, fw), fb)
    out = relay.add(relay.multiply(d, relay.const(0.5)), relay.nn.relu(d))
    params = {"w1": rand(8, 3, 3, 3) * 0.3, "b1": rand(8), "w2": rand(8, 8, 3, 3) * 0.2,
              "fw": rand(10, 8 * 6 * 6 if pool else 8 * 12 * 12) * 0.1, "fb": rand(10)}
    return relay.IRModule.from_expr(relay.Function([x, w1, b1, w2, fw, fb], out)), params


def run_graph(graph_json, lib, params, x) -> np.ndarray:
    m = graph_executor.GraphModule(graph_json, lib, params)
    m.set_input("data", x)
    m.run()
    return m.get_output(0)


def ext_nodes(graph_json: str) -> list[dict]:
    return [n for n in json.loads(graph_json)["nodes"] if n["op"] == "tvm_op" and "compiler" in n["attrs"]]


# -------------------------------------------------------------- patterns
def test_optional_bias_relu_tail_matches_with_and_without_it():
    x = relay.var("x", shape=(1, 2, 5, 5))
    w = relay.const(rand(4, 2, 3, 3))
    b = relay.const(rand(4))
    conv = relay.nn.conv2d(x, w)
    pat = conv_tail()
    assert pat.match(conv)
    assert pat.match(relay.nn.relu(conv))
    assert pat.match(relay.nn.bias_add(conv, b))
    assert pat.match(relay.nn.relu(relay.nn.bias_add(conv, b)))
    assert not pat.match(relay.nn.relu(relay.nn.conv2d(x, relay.var("w", shape=(4, 2, 3, 3)))))  # not constant
    assert not pat.match(relay.sigmoid(conv))
    assert not pat.match(relay.nn.bias_add(conv, relay.var("b", shape=(4,))))


def test_alternatives_attributes_shapes_and_consistent_bindings():
    a = relay.var("a", shape=(2, 3))
    b = relay.var("b", shape=(2, 3))
    add_or_mul = (is_op("add") | is_op("multiply"))(wildcard(), wildcard())
    assert add_or_mul.match(relay.add(a, b)) and add_or_mul.match(relay.multiply(a, b))
    assert not add_or_mul.match(relay.subtract(a, b))
    same = wildcard()
    square = is_op("multiply")(same, same)  # one pattern node twice: the same expression both times
    assert square.match(relay.multiply(a, a)) and not square.match(relay.multiply(a, b))
    assert is_op("add")(is_var("b"), wildcard()).match(relay.add(a, b))  # add commutes
    x = relay.var("x", shape=(1, 2, 8, 8))
    c1 = relay.nn.conv2d(x, relay.const(rand(4, 2, 3, 3)), strides=(2, 2))
    strided = is_op("nn.conv2d")(wildcard(), wildcard()).has_attr({"strides": [2, 2]})
    assert strided.match(c1)
    assert not strided.match(relay.nn.conv2d(x, relay.const(rand(4, 2, 3, 3))))
    assert is_op("nn.conv2d")(wildcard(), wildcard()).has_shape((1, 4, 3, 3)).match(c1)
    assert not is_op("nn.conv2d")(wildcard(), wildcard()).has_shape((1, 4, 6, 6)).match(c1)
    assert is_op("nn.conv2d")(wildcard(), wildcard()).has_dtype("float32").match(c1)
    with pytest.raises(relay.RelayError, match="unknown relay op 'nn.conv3d'"):
        is_op("nn.conv3d")


def test_merge_composite_names_functions_after_patterns():
    mod, params = small_cnn()
    main = relay.bind_params_by_name(mod["main"], params)
    table = [("ccompiler.conv2d", conv_tail()), ("ccompiler.dense", is_op("nn.bias_add")(
        is_op("nn.dense")(wildcard(), is_constant()), is_constant()))]
    out = transform.MergeComposite(table)(relay.IRModule({"main": main}))["main"]
    comps = [n.op.attrs["Composite"] for n in relay.expr.post_order(out.body)
             if isinstance(n, relay.Call) and isinstance(n.op, relay.Function)]
    assert sorted(comps) == ["ccompiler.conv2d", "ccompiler.conv2d", "ccompiler.dense"]
    text = out.astext()
    assert "Composite=ccompiler.conv2d" in text and "nn.max_pool2d" in text
    # the composite is the largest match: conv + bias + relu, not the conv alone
    first = next(n for n in relay.expr.post_order(out.body)
                 if isinstance(n, relay.Call) and isinstance(n.op, relay.Function))
    inner = [m.op.name for m in relay.expr.post_order(first.op.body) if isinstance(m, relay.Call)]
    assert inner == ["nn.conv2d", "nn.bias_add", "nn.relu"]


# -------------------------------------------------------------- partitioning
def test_unsupported_op_stays_with_autosched_and_output_matches_plain_build():
    mod, params = small_cnn()
    x = rand(1, 3, 12, 12)
    plain = relay.build(mod, "llvm", params=params)
    expected = run_graph(*plain, x)
    part = partition_for(mod, "ccompiler", params)
    ext = external_functions(part)
    assert len(ext) == 2 and all(f.attrs["Compiler"] == "ccompiler" for f in ext.values())
    calls = [n for n in relay.expr.post_order(part["main"].body) if isinstance(n, relay.Call)]
    assert [n.op.name for n in calls if not isinstance(n.op, relay.Function)] == ["nn.max_pool2d",
                                                                                  "nn.batch_flatten"]
    res = relay.build(part, "llvm")
    nodes = ext_nodes(res[0])
    assert sorted(n["attrs"]["func_name"] for n in nodes) == sorted(ext)
    assert {k["name"] for k in res.kernels if k.get("external") == "ccompiler"} == set(ext)
    assert "int32_t ccompiler_main_0(" in res[1].imported_modules[0].get_source()
    np.testing.assert_allclose(run_graph(*res, x), expected, rtol=1e-4, atol=1e-4)


def test_whole_graph_offloaded_and_multi_output_region(tmp_path):
    # every call is ccompiler's: one external function, no LLVM kernel at all; it exports and loads too
    x = relay.var("data", shape=(1, 3, 9, 9))
    w1, b1, w2, c = rand(6, 3, 3, 3), rand(6), rand(4, 6, 3, 3), rand(1, 4, 1, 1)
    y = relay.nn.relu(relay.nn.bias_add(relay.nn.conv2d(x, relay.const(w1), padding=(1, 1)), relay.const(b1)))
    y = relay.nn.relu(relay.add(relay.nn.conv2d(y, relay.const(w2), strides=(2, 2)), relay.const(c)))
    mod = relay.IRModule.from_expr(relay.Function([x], y))
    xv = rand(1, 3, 9, 9)
    expected = run_graph(*relay.build(mod, "llvm"), xv)
    part = partition_for(mod, "ccompiler")
    assert list(external_functions(part)) == ["ccompiler_main_0"]
    res = relay.build(part, "llvm")
    assert type(res[1]).__name__ == "CSourceModule"
    np.testing.assert_allclose(run_graph(*res, xv), expected, rtol=1e-4, atol=1e-4)
    graph_executor.export(tmp_path, *res)
    g = graph_executor.load(tmp_path)
    g.set_input("data", xv)
    g.run()
    np.testing.assert_allclose(g.get_output(0), expected, rtol=1e-4, atol=1e-4)

    # two outputs of one region: the function returns a tuple, main takes its fields
    a = relay.var("a", shape=(4, 5))
    c = rand(4, 5)
    s = relay.add(a, a)
    m = relay.multiply(s, relay.const(c))
    out = relay.Tuple([relay.sigmoid(s), m])  # sigmoid is not taken: s leaves the region
    part = partition_for(relay.Function([a], out), "ccompiler")
    fn = external_functions(part)["ccompiler_main_0"]
    assert isinstance(fn.body, relay.Tuple) and len(fn.body.fields) == 2
    av = rand(4, 5)
    graph_json, lib, p = relay.build(part, "llvm")
    g = graph_executor.GraphModule(graph_json, lib, p)
    g.set_input("a", av)
    g.run()
    np.testing.assert_allclose(g.get_output(0), 1 / (1 + np.exp(-(av + av))), rtol=1e-5)
    np.testing.assert_allclose(g.get_output(1), (av + av) * c, rtol=1e-6)


def test_partition_never_creates_a_cycle():
    # relu -> sigmoid -> add, with relu and add taken by ccompiler and sigmoid not: one region {relu, add}
    # would need sigmoid's result, which needs the region's: they must be two functions.
    x = relay.var("x", shape=(3, 4))
    r = relay.nn.relu(x)
    s = relay.sigmoid(r)
    out = relay.add(r, s)
    part = partition_for(relay.Function([x], out), "ccompiler")
    ext = external_functions(part)
    assert len(ext) == 2  # relu and add in separate functions
    xv = rand(3, 4)
    graph_json, lib, p = relay.build(part, "llvm")
    g = graph_executor.GraphModule(graph_json, lib, p)
    g.set_input("x", xv)
    g.run()
    rv = np.maximum(xv, 0)
    np.testing.assert_allclose(g.get_output(0), rv + 1 / (1 + np.exp(-rv)), rtol=1e-5, atol=1e-6)


def test_passes_compose_in_sequential_and_print():
    mod, params = small_cnn()
    main = relay.bind_params_by_name(mod["main"], params)
    seq = transform.Sequential([
        transform.InferType(),
        transform.MergeComposite(relay.dataflow_pattern.get_pattern_table("ccompiler")),
        transform.AnnotateTarget(["ccompiler"]),
        transform.PartitionGraph(),
    ])
    part = seq(relay.IRModule({"main": main}))
    text = part.astext()
    assert "def @ccompiler_main_0" in text and "Compiler=ccompiler" in text and "@ccompiler_main_1(" in text
    annotated = transform.AnnotateTarget("ccompiler")(transform.MergeComposite(
        relay.dataflow_pattern.get_pattern_table("ccompiler"))(relay.IRModule({"main": main})))
    assert "compiler=ccompiler" in annotated.astext()


# -------------------------------------------------------------- deployment and tuning
def test_exported_folder_with_external_code_runs_without_llvmlite(tmp_path):
    mod, params = small_cnn()
    part = partition_for(mod, "ccompiler", params)
    graph_json, lib, out_params = relay.build(part, "llvm")
    x = rand(1, 3, 12, 12)
    expected = run_graph(graph_json, lib, out_params, x)
    graph_executor.export(tmp_path, graph_json, lib, out_params)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "expected.npy", expected)
    code = (
        "import sys; sys.modules['llvmlite'] = None\n"
        "import numpy as np\n"
        "from autosched.runtime import graph_executor\n"
        f"d = {str(tmp_path)!r}\n"
        "m = graph_executor.load(d)\n"
        "assert any(n.startswith('ccompiler_main_') for n in m.lib.function_names), m.lib.function_names\n"
        "m.set_input('data', np.load(d + '/x.npy')); m.run()\n"
        "np.testing.assert_allclose(m.get_output(0), np.load(d + '/expected.npy'), rtol=1e-5, atol=1e-5)\n"
        "assert 'llvmlite.binding' not in sys.modules\n"
        "print('ok')\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "AUTOSCHED_NUM_THREADS": "1"})
    assert res.returncode == 0 and "ok" in res.stdout, res.stderr


def test_extract_tasks_skips_external_calls_and_counts_them(caplog):
    mod, params = small_cnn()
    plain = relay.extract_tasks(mod, params)
    part = partition_for(mod, "ccompiler", params)
    with caplog.at_level(logging.INFO, logger="autosched.relay"):
        tasks = relay.extract_tasks(part)
    assert plain.external == {} and tasks.external == {"ccompiler": 2}
    assert len(tasks) == 1 and "max_pool2d" in tasks[0].label  # only the pool is left to tune
    assert len(plain) > len(tasks)
    assert "calls left to external compilers: ccompiler: 2" in caplog.text


def test_build_log_counts_external_functions(caplog):
    mod, params = small_cnn()
    part = partition_for(mod, "ccompiler", params)
    with caplog.at_level(logging.INFO, logger="autosched.relay"):
        relay.build(part, "llvm")
    assert "and 2 external functions" in caplog.text
    assert "is compiled by external compiler ccompiler" in caplog.text


# -------------------------------------------------------------- errors
def test_codegen_that_raises_names_the_target_and_the_function():
    x = relay.var("x", shape=(2, 3))
    relay.op.register_op_attr("nn.relu", "target.brokenlib", True)

    def broken(fn):
        raise ValueError("no relu in this library today")

    register_func("relay.ext.brokenlib", broken)
    try:
        part = transform.PartitionGraph()(transform.AnnotateTarget("brokenlib")(
            relay.IRModule.from_expr(relay.sigmoid(relay.nn.relu(x)))))
        assert list(external_functions(part)) == ["brokenlib_main_0"]
        with pytest.raises(relay.RelayError, match=r"relay\.ext\.brokenlib failed on function brokenlib_main_0: "
                                                   r"ValueError: no relu in this library today"):
            relay.build(part, "llvm")
    finally:
        remove_global_func("relay.ext.brokenlib")
    with pytest.raises(relay.RelayError, match="no codegen is registered as 'relay.ext.brokenlib'"):
        relay.build(part, "llvm")


def test_bad_pattern_tables_and_unknown_targets():
    with pytest.raises(relay.RelayError, match="no pattern table registered for target 'nolib'"):
        relay.dataflow_pattern.get_pattern_table("nolib")
    mod, _ = small_cnn()
    with pytest.raises(relay.RelayError, match="pattern 'bad' is not a dataflow pattern"):
        transform.MergeComposite([("bad", "conv2d")])(mod)
    with pytest.raises(relay.RelayError, match="needs at least one target"):
        transform.AnnotateTarget([])


def test_the_documented_example_target_runs(capsys):
    import runpy
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "examples" / "byoc_mylib.py"
    assert len(path.read_text().splitlines()) < 100  # the doc promises a target in under a hundred lines
    try:
        runpy.run_path(str(path), run_name="__main__")
    finally:
        remove_global_func("relay.ext.mylib")
    out = capsys.readouterr().out
    assert "def @mylib_main_0" in out and "Composite=mylib.dense_relu" in out
    assert "mylib output matches the plain build" in out
