"""sync/gc_pause.py: no cyclic collection inside a paused step, the collector back as it was after."""

from __future__ import annotations

import gc
import threading

import pytest

from offset_pipeline.assets.commit import offset_standby_commits
from offset_pipeline.sync.gc_pause import cyclic_gc_paused


@pytest.fixture(autouse=True)
def collector_enabled():
    gc.enable()
    yield
    gc.enable()


def test_paused_inside_and_enabled_after_even_on_error():
    with cyclic_gc_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(RuntimeError), cyclic_gc_paused():
        raise RuntimeError("a step failed")
    assert gc.isenabled()


def test_nested_and_concurrent_pauses_end_with_the_last():
    outer_done, inner_started = threading.Event(), threading.Event()
    seen_in_other_step = []

    def other_step():
        with cyclic_gc_paused():
            inner_started.set()
            outer_done.wait(10)
            seen_in_other_step.append(gc.isenabled())  # the first pause ended; this one still holds

    with cyclic_gc_paused():
        with cyclic_gc_paused():
            pass
        assert not gc.isenabled()  # the inner end does not re-enable
        thread = threading.Thread(target=other_step)
        thread.start()
        assert inner_started.wait(10)
    outer_done.set()
    thread.join(10)
    assert seen_in_other_step == [False]
    assert gc.isenabled()


def test_a_collector_disabled_before_stays_disabled():
    gc.disable()
    with cyclic_gc_paused():
        pass
    assert not gc.isenabled()


def test_the_collector_runs_again_after_a_step_and_frees_its_cycles():
    class Node:
        pass

    with cyclic_gc_paused():
        a, b = Node(), Node()
        a.other, b.other = b, a
        alive = [id(a)]
        del a, b
    gc.collect()
    assert all(id(o) not in alive for o in gc.get_objects() if isinstance(o, Node))


def test_the_sync_assets_keep_their_signature_for_dagster():
    # Dagster reads the resources and config from the decorated function's signature.
    assert {"idc1", "idc2", "clickhouse"} <= set(offset_standby_commits.required_resource_keys)
