"""`bench-dot-cost --only timeline`'s split of a miss (Scripts/bench-dot-cost, miss_timeline), on synthetic traces.

The split is a diagnostic that BENCHMARKS.md reads ratios by: which CPU the kernel woke the DoT server on, and
whether the forwarder took the client's CPU before the client had gone to sleep for the answer (round 21), and where
a delayed reply's wake-up put the forwarder and the answered client (round 24). Misses in the format of `perf script -F pid,tid,cpu,time,event,trace`: one where the client sleeps before the
forwarder runs (server on the forwarder's CPU), one where the forwarder preempts it (server on the other CPU).
"""

import importlib.machinery
import importlib.util

import pytest

from conftest import REPO

loader = importlib.machinery.SourceFileLoader("bench_dot_cost", str(REPO / "Scripts" / "bench-dot-cost"))
spec = importlib.util.spec_from_loader("bench_dot_cost", loader)
bench = importlib.util.module_from_spec(spec)
loader.exec_module(bench)

CLIENT, FORWARDER, WORKER, SERVER = 100, 200, 201, 300


def waking(pid, tid, cpu, t, target, name="x", target_cpu=None):
    where = cpu if target_cpu is None else target_cpu
    return (f"{pid}/{tid} [{cpu:03d}] {t:.6f}: sched:sched_waking: comm={name} pid={target} prio=120 "
            f"target_cpu={where:03d}")


def switch(pid, tid, cpu, t, prev, state, nxt):
    return (f"{pid}/{tid} [{cpu:03d}] {t:.6f}: sched:sched_switch: prev_comm=a prev_pid={prev} prev_prio=120 "
            f"prev_state={state} ==> next_comm=b next_pid={nxt} next_prio=120")


def asleep_first(t):
    """The client sleeps before the forwarder runs; everything on CPU 1."""
    return [
        waking(CLIENT, CLIENT, 1, t, WORKER),
        switch(CLIENT, CLIENT, 1, t + 0.000010, CLIENT, "S", WORKER),
        waking(FORWARDER, WORKER, 1, t + 0.000100, SERVER),
        switch(FORWARDER, WORKER, 1, t + 0.000110, WORKER, "R", SERVER),
        switch(SERVER, SERVER, 1, t + 0.000200, SERVER, "S", WORKER),
        waking(FORWARDER, WORKER, 1, t + 0.000250, CLIENT),
        switch(FORWARDER, WORKER, 1, t + 0.000256, WORKER, "S", CLIENT),
    ]


def preempted(t):
    """The forwarder takes CPU 0 from the running client; the server runs on CPU 1."""
    return [
        waking(CLIENT, CLIENT, 0, t, WORKER),
        switch(CLIENT, CLIENT, 0, t + 0.000010, CLIENT, "R", WORKER),
        waking(FORWARDER, WORKER, 0, t + 0.000100, SERVER),
        switch(FORWARDER, WORKER, 0, t + 0.000110, WORKER, "S", CLIENT),
        switch(0, 0, 1, t + 0.000150, 0, "R", SERVER),
        switch(SERVER, SERVER, 1, t + 0.000300, SERVER, "S", 0),
        waking(FORWARDER, WORKER, 0, t + 0.000350, CLIENT, target_cpu=1),
        switch(0, 0, 1, t + 0.000370, 0, "R", CLIENT),
    ]


def split(lines):
    return bench.miss_timeline("\n".join(lines), CLIENT, {FORWARDER, WORKER}, SERVER)


def test_client_asleep_server_on_forwarders_cpu():
    result = split(asleep_first(1.0))
    assert result["misses_split"] == 1
    assert result["same_cpu_share"] == 1.0
    assert result["client_preempted_share"] == 0.0
    assert result["reply"] == pytest.approx(50, abs=1)
    # The answer woke the client on the forwarder's CPU, where it ran once the forwarder slept.
    assert result["deliver"] == pytest.approx(6, abs=1)
    assert result["client_on_answer_cpu_share"] == 1.0
    assert result["total"] == pytest.approx(256, abs=1)


def test_client_preempted_server_on_other_cpu():
    result = split(preempted(1.0))
    assert result["misses_split"] == 1
    assert result["same_cpu_share"] == 0.0
    assert result["client_preempted_share"] == 1.0
    assert result["server"] == pytest.approx(200, abs=1)
    # The answer woke the client on the other CPU, which ran it 20 us later.
    assert result["deliver"] == pytest.approx(20, abs=1)
    assert result["client_on_answer_cpu_share"] == 0.0


def test_shares_over_mixed_misses():
    lines = asleep_first(1.0) + preempted(1.01) + preempted(1.02) + asleep_first(1.03)
    result = split(lines)
    assert result["misses_seen"] == 4 and result["misses_split"] == 4
    assert result["same_cpu_share"] == 0.5
    assert result["client_preempted_share"] == 0.5
    assert result["client_on_answer_cpu_share"] == 0.5
    assert result["other_cpu"]["total"] == pytest.approx(370, abs=1)
    assert result["same_cpu"]["total"] == pytest.approx(256, abs=1)


DELAYER = 400


def delayed(t):
    """--upstream-delay-ms 5: the server forwards the question and sleeps; 5 ms later the delaying server wakes it,
    it writes the reply (waking the forwarder on CPU 0) and runs on while the forwarder answers the client."""
    return [
        waking(CLIENT, CLIENT, 0, t, WORKER),
        switch(CLIENT, CLIENT, 0, t + 0.000010, CLIENT, "S", WORKER),
        waking(FORWARDER, WORKER, 0, t + 0.000050, SERVER),
        switch(FORWARDER, WORKER, 0, t + 0.000060, WORKER, "S", 0),
        switch(0, 0, 1, t + 0.000070, 0, "R", SERVER),
        waking(SERVER, SERVER, 1, t + 0.000120, DELAYER),
        switch(SERVER, SERVER, 1, t + 0.000130, SERVER, "S", DELAYER),
        waking(DELAYER, DELAYER, 1, t + 0.005130, SERVER),
        switch(DELAYER, DELAYER, 1, t + 0.005140, DELAYER, "S", SERVER),
        waking(SERVER, SERVER, 1, t + 0.005200, WORKER, target_cpu=0),
        switch(0, 0, 0, t + 0.005210, 0, "R", WORKER),
        waking(FORWARDER, WORKER, 0, t + 0.005260, CLIENT),
        switch(SERVER, SERVER, 1, t + 0.005280, SERVER, "S", 0),
        switch(FORWARDER, WORKER, 0, t + 0.005290, WORKER, "S", CLIENT),
    ]


def test_delayed_upstream_splits_at_the_servers_wake_up_of_the_forwarder():
    result = bench.miss_timeline("\n".join(delayed(1.0)), CLIENT, {FORWARDER, WORKER}, SERVER, delay_us=5000)
    assert result["misses_split"] == 1
    assert result["query"] == pytest.approx(40, abs=1)
    assert result["server"] == pytest.approx(5150, abs=1)  # the question written until the reply wakes the forwarder
    assert result["reply"] == pytest.approx(60, abs=1)
    # Of the reply: the forwarder's wake-up on the other CPU (10 us), then its run until it wakes the client.
    assert result["reply_wake"] == pytest.approx(10, abs=1)
    assert result["reply_run"] == pytest.approx(50, abs=1)
    assert result["reply_on_server_cpu_share"] == 0.0
    assert result["deliver"] == pytest.approx(30, abs=1)
    assert result["total"] == pytest.approx(5290, abs=1)
    assert result["same_cpu_share"] == 0.0
    # Without the delay the split looks only 4 ms ahead and ends the server's step at its first sleep: the miss is
    # not split.
    assert bench.miss_timeline("\n".join(delayed(1.0)), CLIENT, {FORWARDER, WORKER}, SERVER)["misses_split"] == 0


def delayed_on_servers_cpu(t):
    """As `delayed`, but the kernel puts the woken forwarder on the server's CPU, where it preempts the server."""
    lines = delayed(t)[:9]
    return lines + [
        waking(SERVER, SERVER, 1, t + 0.005200, WORKER, target_cpu=0),
        switch(SERVER, SERVER, 1, t + 0.005207, SERVER, "R", WORKER),
        waking(FORWARDER, WORKER, 1, t + 0.005250, CLIENT, target_cpu=0),
        switch(FORWARDER, WORKER, 1, t + 0.005256, WORKER, "R", SERVER),
        switch(0, 0, 0, t + 0.005270, 0, "R", CLIENT),
    ]


def test_delayed_reply_on_the_servers_cpu():
    lines = delayed_on_servers_cpu(1.0) + delayed(1.01)
    result = bench.miss_timeline("\n".join(lines), CLIENT, {FORWARDER, WORKER}, SERVER, delay_us=5000)
    assert result["misses_split"] == 2
    assert result["reply_on_server_cpu_share"] == 0.5
    first = bench.miss_timeline("\n".join(delayed_on_servers_cpu(1.0)), CLIENT, {FORWARDER, WORKER}, SERVER,
                                delay_us=5000)
    assert first["reply_on_server_cpu_share"] == 1.0
    assert first["reply_wake"] == pytest.approx(7, abs=1)
    assert first["reply_run"] == pytest.approx(43, abs=1)
    # The client slept on CPU 0 and ran there, not on the answer's CPU 1.
    assert first["client_on_answer_cpu_share"] == 0.0
    assert first["deliver"] == pytest.approx(20, abs=1)
