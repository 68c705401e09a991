"""The runtime's CPU budget: engines share the cores instead of each taking its own guess."""

from __future__ import annotations

from typing import Any

import pytest

import dragoman.transports.runtime as runtime_module
from dragoman.config import load_settings
from dragoman.engines.asr.base import call_layout
from dragoman.transports.runtime import Runtime, thread_share


@pytest.mark.parametrize(("engines", "cores", "threads"), [(1, 2, 2), (2, 2, 1), (2, 16, 8), (3, 2, 1)])
def test_each_engine_gets_an_equal_share_and_at_least_one_thread(
    engines: int, cores: int, threads: int
) -> None:
    assert thread_share(engines, cores) == threads


@pytest.mark.parametrize(
    ("threads", "parallel_calls", "cpu", "layout"),
    [
        (2, 0, True, (2, 1)),  # a CPU's default: a call per thread
        (1, 0, True, (1, 1)),
        (8, 2, True, (2, 4)),  # calls set: they share the threads
        (2, 4, True, (4, 1)),  # more calls than threads: each still gets one
        (2, 0, False, (1, 2)),  # a GPU: one call
    ],
)
def test_an_asr_engines_threads_become_calls_side_by_side_on_a_cpu(
    threads: int, parallel_calls: int, cpu: bool, layout: tuple[int, int]
) -> None:
    assert call_layout(threads, parallel_calls, cpu=cpu) == layout


def test_two_services_on_two_cores_do_not_oversubscribe(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runtime_module, "available_cores", lambda: 2)
    budgeted = Runtime(load_settings())._budgeted()
    assert (budgeted.asr.threads, budgeted.mt.threads) == (1, 1)


def test_one_service_gets_every_core_and_set_threads_are_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runtime_module, "available_cores", lambda: 2)
    alone = Runtime(load_settings(services=["mt"]))._budgeted()
    assert alone.mt.threads == 2
    overrides: dict[str, Any] = {"asr.threads": 2}  # a dotted key: no keyword argument
    pinned = Runtime(load_settings(**overrides))._budgeted()
    assert (pinned.asr.threads, pinned.mt.threads) == (2, 1)


def test_the_agents_llm_gets_every_core_alone_and_leaves_one_beside_other_services(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(runtime_module, "available_cores", lambda: 2)
    alone = Runtime(load_settings(services=["agent"]))._budgeted()
    assert (alone.llm.threads, alone.tts.threads, alone.asr.threads) == (2, 1, 2)
    shared = Runtime(load_settings())._budgeted()
    assert (shared.llm.threads, shared.tts.threads) == (1, 1)
