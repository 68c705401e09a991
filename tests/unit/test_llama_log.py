"""llama.cpp's messages reach the structured log whole, at ggml.h's own levels."""

from __future__ import annotations

import threading

import structlog

from dragoman.engines import llama_log
from dragoman.engines.llama_log import CONT, DEBUG, ERROR, INFO, WARN


def logged(pieces: list[tuple[int, str]]) -> list[tuple[str, str, str]]:
    with structlog.testing.capture_logs() as entries:
        for level, text in pieces:
            llama_log.take(level, text)
    return [(e["log_level"], e["event"], e["detail"]) for e in entries]


def test_each_level_is_ggmls_own() -> None:
    # ggml.h: DEBUG = 1, INFO = 2, WARN = 3, ERROR = 4 (llama-cpp-python reads them one off);
    # its info is the server's debug.
    assert logged([(ERROR, "decode: invalid token[0] = 151941\n")]) == [
        ("error", "llama.cpp error", "decode: invalid token[0] = 151941")
    ]
    assert logged([(WARN, "n_ctx_per_seq (4096) < n_ctx_train\n")]) == [
        ("warning", "llama.cpp warning", "n_ctx_per_seq (4096) < n_ctx_train")
    ]
    assert logged([(INFO, "load_backend: loaded CPU backend\n"), (DEBUG, "graph_reserve\n")]) == [
        ("debug", "llama.cpp", "load_backend: loaded CPU backend")
    ]  # llama.cpp's own debug level (a line per graph input of every context) is left out


def test_a_message_sent_in_pieces_is_one_line_at_its_first_pieces_level() -> None:
    assert logged([(ERROR, "failed to decode"), (CONT, " the batch"), (CONT, ", ret = -1\n")]) == [
        ("error", "llama.cpp error", "failed to decode the batch, ret = -1")
    ]


def test_a_message_left_without_its_newline_is_ended_by_the_next() -> None:
    assert logged([(WARN, "no newline"), (INFO, "next\n"), (INFO, "\n")]) == [
        ("warning", "llama.cpp warning", "no newline"),
        ("debug", "llama.cpp", "next"),
    ]


def test_threads_write_their_own_messages() -> None:
    with structlog.testing.capture_logs() as entries:
        llama_log.take(ERROR, "main thread ")
        other = threading.Thread(target=lambda: llama_log.take(WARN, "other thread\n"))
        other.start()
        other.join()
        llama_log.take(CONT, "goes on\n")
    assert [(e["log_level"], e["detail"]) for e in entries] == [
        ("warning", "other thread"),
        ("error", "main thread goes on"),
    ]


def test_the_packaged_models_known_load_warning_is_chatter() -> None:
    known = "load: control-looking token: 128247 '</s>' was not control-type; its type will be overridden"
    assert logged([(WARN, known + "\n")]) == [("debug", "llama.cpp", known)]
