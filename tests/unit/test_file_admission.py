"""File jobs' admission: a bounded number at once, a bounded line, 429 past both."""

from __future__ import annotations

import asyncio

import pytest

from dragoman.sessions.file_transcription import compression_ratio, delta_of, language_name
from dragoman.transports.file_transcription import Admission, FilesBusy


async def test_jobs_past_the_slots_wait_and_past_the_line_are_refused() -> None:
    admission = Admission(concurrent=1, waiting=1)
    first = await admission.acquire()
    second = asyncio.create_task(admission.acquire())
    await asyncio.sleep(0)
    assert admission.waiting == 1 and not second.done()
    with pytest.raises(FilesBusy) as raised:
        await admission.acquire()
    assert raised.value.status == 429 and raised.value.code == "rate_limit_exceeded"
    first()
    first()  # a second release is harmless: the slot is given back once
    release = await asyncio.wait_for(second, 1)
    assert admission.waiting == 0
    third = asyncio.create_task(admission.acquire())
    await asyncio.sleep(0)
    assert not third.done()  # the one slot is still taken, whatever the double release did
    release()
    (await asyncio.wait_for(third, 1))()


def test_deltas_join_windows_as_the_transcript_does() -> None:
    assert delta_of("", " Hello.") == "Hello."
    assert delta_of("Hello.", " World.") == " World."
    assert delta_of("Hello.", "   ") == ""
    assert delta_of("你好。", "世界。") == "世界。"


def test_whisper_measures_and_names() -> None:
    assert compression_ratio("") == 0.0
    assert compression_ratio("la " * 200) > 2.4 > compression_ratio("And so my fellow Americans, ask not.")
    assert language_name("en") == "english" and language_name("zh") == "chinese"
    assert language_name(None) == "unknown"
