"""Multipart forms, as the HTTP routes that take uploads read them (`POST /v1/audio/transcriptions`,
the WebRTC calls' SDP offers).

Starlette refuses a body it cannot parse as multipart (a cut boundary, too many parts, a part
past its size) with its own `HTTPException`, which FastAPI would answer as `{"detail": ...}`.
Here that is the client's `InvalidValue`, so the route answers in OpenAI's error shape.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from starlette.datastructures import FormData
from starlette.exceptions import HTTPException
from starlette.requests import Request

from dragoman.errors import InvalidValue, scrub


@contextlib.asynccontextmanager
async def multipart_form(request: Request, param: str, **limits: int) -> AsyncIterator[FormData]:
    """The request's form within Starlette's `limits` (`max_files`, `max_fields`,
    `max_part_size`), closed after the block; InvalidValue naming `param` for a body that is not
    one."""
    try:
        form = await request.form(**limits)
    except HTTPException as exc:
        raise InvalidValue(
            f"The multipart body could not be read: {scrub(str(exc.detail))}", param=param
        ) from None
    try:
        yield form
    finally:
        await form.close()
