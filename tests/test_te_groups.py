"""Stage groups (TVM's ``s.create_group``): stages placed as one, nested groups, a scan's step as a group, the
refusals, and groups as trace steps (JSON replay, printed schedule code)."""

import re

import numpy as np
import pytest

import autosched
from autosched import auto_scheduler, te
from autosched.errors import ScheduleError
from autosched.te.trace import GroupComputeRoot, Trace
from autosched.te.trace_code import schedule_code


def _chain(m=None, n=None):
    """x -> x1 -> x2, each elementwise, each read by the next only."""
    m, n = m or te.var("m"), n or te.var("n")
    X = te.placeholder((m, n), name="X")
    x = te.compute((m, n), lambda i, j: X[i, j] * 2.0, name="x")
    x1 = te.compute(x.shape, lambda i, j: x[i, j] + 1.0, name="x1")
    x2 = te.compute(x.shape, lambda i, j: x1[i, j] * 3.0, name="x2")
    return X, x, x1, x2


def _allocs(s, args):
    return dict(re.findall(r"allocate (\S+): (\S+\[[^\]]*\])", str(autosched.lower(s, args))))


def _run(s, X, x2, shape=(5, 7)):
    f = autosched.build(s, [X, x2])
    a = np.random.default_rng(3).random(shape).astype("float32")
    out = np.zeros_like(a)
    f(a, out)
    np.testing.assert_allclose(out, (a * 2 + 1) * 3, rtol=1e-6)


def test_a_group_is_computed_at_a_loop_as_one():
    X, x, x1, x2 = _chain()
    s = te.create_schedule(x2.op)
    g = s.create_group(outputs=x1, inputs=x, include_inputs=True)
    assert s[x].group is g and s[x1].group is g and s[x2].group is None
    assert g.num_child_stages == 2 and s.groups == [g]
    g.compute_at(s[x2], x2.op.axis[0])
    assert g.attach_stage is s[x2]
    for t in (x, x1):  # both members now compute one row inside x2's row loop
        assert s[t].attach_type == "scope" and s[t].attach_stage is s[x2]
    assert set(_allocs(s, [X, x2]).values()) == {"float32[1, n]"}
    bounds = te.schedule.InferBound(s)
    assert int(bounds[x.op.axis[0]].extent) == 1
    _run(s, X, x2)
    # a member computed at another member stays there when the group moves
    s2 = te.create_schedule(x2.op)
    g2 = s2.create_group(outputs=x1, inputs=x, include_inputs=True)
    s2[x].compute_at(s2[x1], x1.op.axis[1])
    g2.compute_at(s2[x2], x2.op.axis[0])
    assert s2[x].attach_stage is s2[x1] and s2[x1].attach_stage is s2[x2]
    g2.compute_root()
    assert s2[x1].attach_type == "root" and s2[x].attach_stage is s2[x1]


def test_nested_groups_place_inner_members_at_the_inner_groups_loop():
    X, x, x1, x2 = _chain()
    s = te.create_schedule(x2.op)
    g1 = s.create_group(outputs=x, inputs=x, include_inputs=True)
    g2 = s.create_group(outputs=x1, inputs=x, include_inputs=True)
    assert g1.group is g2 and s[x].group is g1 and s[x1].group is g2
    assert (g2.num_child_stages, g1.num_child_stages) == (2, 1)
    g2.compute_at(s[x2], x2.op.axis[0])
    assert s[x].attach_stage is s[x2]  # g1 sits at g2's root: it goes with g2
    g1.compute_at(s[x1], x1.op.axis[1])
    bounds = te.schedule.InferBound(s)
    assert [int(bounds[a].extent) for a in x.op.axis] == [1, 1]
    assert int(bounds[x1.op.axis[0]].extent) == 1
    _run(s, X, x2)
    # a group made over an existing one takes it in whole, whatever the order of creation
    s2 = te.create_schedule(x2.op)
    h1 = s2.create_group(outputs=x1, inputs=x)
    h2 = s2.create_group(outputs=x1, inputs=x, include_inputs=True)
    assert h1.group is h2 and s2[x1].group is h1 and s2[x].group is h2


def test_group_refusals_name_the_group_and_the_stage():
    X, x, x1, x2 = _chain()
    s = te.create_schedule(x2.op)
    g = s.create_group(outputs=x1, inputs=x)  # x1 alone
    with pytest.raises(ScheduleError, match=r"'x1' is in group\(x1\) and 'x2' is not"):
        s[x1].compute_at(s[x2], x2.op.axis[0])
    with pytest.raises(ScheduleError, match="inside the group"):
        g.compute_at(s[x1], x1.op.axis[0])
    with pytest.raises(ScheduleError, match="no stage lies on a path"):
        s.create_group(outputs=x, inputs=x1)
    s3 = te.create_schedule(x2.op)
    s3.create_group(outputs=x1, inputs=X, include_inputs=False)  # x and x1
    with pytest.raises(ScheduleError, match="cut group"):
        s3.create_group(outputs=x2, inputs=x)  # x1 and x2: half of the first group
    s4 = te.create_schedule(x2.op)
    s4[x].compute_at(s4[x2], x2.op.axis[0])
    with pytest.warns(UserWarning, match="'x' was computed at a loop of 'x2', outside the group"):
        s4.create_group(outputs=x1, inputs=X)
    assert s4[x].attach_type == "root"
    with pytest.raises(ScheduleError, match="no group 3"):
        s4.apply(GroupComputeRoot(3))


def test_a_scans_step_is_a_group_in_its_time_loop():
    m, n = te.var("m"), te.var("n")
    X = te.placeholder((m, n), name="X")
    state = te.placeholder((m, n), name="state")
    init = te.compute((1, n), lambda _, i: X[0, i], name="init")
    u1 = te.compute((m, n), lambda t, i: state[t - 1, i] + X[t, i], name="u1")
    u2 = te.compute((m, n), lambda t, i: u1[t, i] * 0.5, name="u2")
    u3 = te.compute((m, n), lambda t, i: u2[t, i] + 1.0, name="u3")
    res = te.scan(init, u3, state, inputs=[X])
    s = te.create_schedule(res.op)
    scan_group = s[u1].group
    assert scan_group is not None and s[u2].group is scan_group and s[init].group is None
    assert scan_group.attach_stage is s[res]
    s[u1].compute_at(s[u2], u2.op.axis[1])
    g = s.create_group(outputs=u2, inputs=[state, X])
    assert g.group is scan_group and s[u1].group is g and s[u2].group is g
    g.compute_at(s[u3], u3.op.axis[1])
    assert g.attach_stage is s[u3] and s[u2].attach_stage is s[u3] and s[u1].attach_stage is s[u2]
    with pytest.raises(ScheduleError, match="is in group"):
        s[u2].compute_at(s[init], init.op.axis[0])
    s[u2].compute_root()  # the root inside a group is where the group is: at u3's loop
    assert s[u2].attach_stage is s[u3]
    g.compute_root()  # and the scan group's root is the scan's time loop
    assert s[u2].attach_stage is s[res] and s[u2].attach_ivar is s[res].leaf_iter_vars[0]
    g.compute_at(s[u3], u3.op.axis[1])
    f = autosched.build(s, [X, res])
    a = np.random.default_rng(5).random((6, 9)).astype("float32")
    out = np.zeros_like(a)
    f(a, out)
    want = np.empty_like(a)
    want[0] = a[0]
    for t in range(1, 6):
        want[t] = (want[t - 1] + a[t]) * 0.5 + 1.0
    np.testing.assert_allclose(out, want, rtol=1e-5)
    fresh = te.create_schedule(res.op)
    Trace.loads(s.trace.dumps()).replay(fresh)
    assert str(autosched.lower(fresh, [X, res])) == str(autosched.lower(s, [X, res]))


@auto_scheduler.register_workload
def _grouped_chain(m, n):
    X, x, x1, x2 = _chain(m, n)
    return [X, x2]


def test_groups_are_trace_steps_that_replay_and_print_as_code():
    task = auto_scheduler.SearchTask(func=_grouped_chain, args=(16, 24))
    s, (X, x2) = task.schedule()
    x1 = x2.op.input_tensors[0]
    x = s[x1].op.input_tensors[0]
    xo, xi = s[x2].split(x2.op.axis[0], factor=4)
    g = s.create_group(outputs=x1, inputs=x, include_inputs=True)
    g.compute_at(s[x2], xo)
    s[x2].vectorize(x2.op.axis[1])
    assert [st.kind for st in s.trace][-3:] == ["create_group", "group_compute_at", "annotate"]
    fresh, _ = task.schedule()
    Trace.loads(s.trace.dumps()).replay(fresh)
    assert str(autosched.lower(fresh, [X, x2])) == str(autosched.lower(s, [X, x2]))
    assert set(_allocs(s, [X, x2]).values()) == {"float32[4, 24]"}
    code = schedule_code(task, s.trace)
    assert "g0 = s.create_group(outputs=[x1], inputs=[x], include_inputs=True)" in code
    assert "g0.compute_at(s[x2], x2_i_outer)" in code
    again, tensors = task.schedule()
    env = {"s": again, "te": te, **{t.name: t for t in (*tensors, x, x1)}}
    exec(code, env)
    assert again.trace == s.trace
    _run(s, X, x2, (16, 24))
