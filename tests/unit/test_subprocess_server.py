"""The harness's life of a server subprocess, on real processes: ready once it answers, an
error with its log's tail when it exits or never answers, and a SIGKILL for one that ignores
SIGTERM."""

from __future__ import annotations

import functools
import signal
import sys
import time
from pathlib import Path

import pytest

from harness.subprocess_server import answers, free_port, launch, serving, terminate, wait_ready


def python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def test_a_server_is_ready_once_it_answers_and_gone_after_the_block(tmp_path: Path) -> None:
    port = free_port()
    argv = [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"]
    url = f"http://127.0.0.1:{port}/"
    with serving(
        "http.server", argv, tmp_path / "out.log", functools.partial(answers, url), 30, grace=5
    ) as p:
        assert answers(url)
    assert p.returncode == -signal.SIGTERM
    assert not answers(url)


def test_a_process_that_exits_before_it_is_ready_raises_with_its_output(tmp_path: Path) -> None:
    log = tmp_path / "out.log"
    argv = python("print('no model here'); raise SystemExit(3)")
    with (
        pytest.raises(RuntimeError, match=r"(?s)crasher exited with 3:.*no model here"),
        serving("crasher", argv, log, lambda: False, 30, grace=5),
    ):
        pytest.fail("never ready")


def test_one_that_never_answers_raises_at_the_deadline_with_every_log(tmp_path: Path) -> None:
    out, error_log = tmp_path / "out.log", tmp_path / "error.log"
    process = launch(python("print('still loading', flush=True); import time; time.sleep(60)"), out)
    error_log.write_text("bind() failed")
    try:
        wait_ready("slow", process, lambda: "still loading" in out.read_text(), 30, [out], interval=0.05)
        logs = [out, error_log, tmp_path / "absent.log"]
        with pytest.raises(
            RuntimeError, match=r"(?s)slow did not start in 0.5 s:.*still loading.*bind\(\) failed"
        ):
            wait_ready("slow", process, lambda: False, 0.5, logs, interval=0.05, becoming="start")
        assert process.poll() is None, "waiting does not stop it"
    finally:
        terminate(process, grace=5)
    assert process.returncode == -signal.SIGTERM


def test_one_that_ignores_sigterm_is_killed_after_its_grace(tmp_path: Path) -> None:
    stubborn = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
    log = tmp_path / "out.log"
    process = launch(python(stubborn + "print('up', flush=True); time.sleep(60)"), log)
    wait_ready("stubborn", process, lambda: log.read_text() == "up\n", 30, [log], interval=0.05)
    began = time.monotonic()
    terminate(process, grace=0.5)
    assert process.returncode == -signal.SIGKILL
    assert time.monotonic() - began >= 0.5, "SIGTERM had its grace"
