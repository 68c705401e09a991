"""llama.cpp's own messages, in the server's structured log at their own level.

llama-cpp-python's handler reads ggml's log levels one off (it has INFO = 1 ... DEBUG = 4,
where ggml.h has `GGML_LOG_LEVEL_DEBUG = 1, INFO = 2, WARN = 3, ERROR = 4, CONT = 5`): its
warnings reach stderr as raw text and llama.cpp's errors (why a decode failed) are dropped.
Its quiet mode (`verbose=False`) is worse: while a model loads it points the process's
stdout and stderr at /dev/null, dropping every other thread's log lines meanwhile. So the
engines load verbosely and this handler, installed first, keeps llama.cpp's chatter at debug
(its own debug level, a line per graph input of every context, is left out).
"""

from __future__ import annotations

import contextlib
import ctypes
import sys
import threading

import llama_cpp

from dragoman.logs import get_logger

log = get_logger("llama.cpp")

#: ggml.h's `enum ggml_log_level`.
DEBUG, INFO, WARN, ERROR, CONT = 1, 2, 3, 4, 5
#: Warnings about the model file that every load of the packaged Qwen2.5 GGUFs gives (a token
#: typed as text that llama.cpp retypes as a control token, as it should be): nothing an
#: operator can act on, so they stay with the rest of the load's chatter.
KNOWN_AT_LOAD = ("load: control-looking token",)


class _Lines(threading.local):
    """The message a thread is writing: llama.cpp sends a line in pieces (`CONT` goes on)."""

    level = DEBUG
    text = ""


_lines = _Lines()


def take(level: int, text: str) -> None:
    """One piece of a message; a whole line goes to the log."""
    if level != CONT:
        if _lines.text:  # a new message ends one left without its newline
            _emit(_lines.level, _lines.text)
            _lines.text = ""
        _lines.level = level
    _lines.text += text
    if _lines.text.endswith("\n"):
        _emit(_lines.level, _lines.text)
        _lines.text = ""


def _emit(level: int, text: str) -> None:
    message = text.strip()
    if not message or level == DEBUG:  # its debug level: a line per graph input, per context
        return
    if level == ERROR:
        log.error("llama.cpp error", detail=message)
    elif level == WARN and not message.startswith(KNOWN_AT_LOAD):
        log.warning("llama.cpp warning", detail=message)
    else:
        log.debug("llama.cpp", detail=message)


@llama_cpp.llama_log_callback  # type: ignore[untyped-decorator]
def _callback(level: int, text: bytes, user_data: ctypes.c_void_p) -> None:
    if sys.is_finalizing():
        return  # contexts freed at exit still log, with no logging left to take it
    with contextlib.suppress(Exception):  # a log line must never raise into llama.cpp's C code
        take(int(level), text.decode("utf-8", errors="replace"))


_installed = False
_install_lock = threading.Lock()


def install() -> None:
    """Route llama.cpp's messages here (once per process; the callback lives as long)."""
    global _installed
    with _install_lock:
        if not _installed:
            llama_cpp.llama_log_set(_callback, ctypes.c_void_p(0))
            _installed = True
