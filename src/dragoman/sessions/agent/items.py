"""`conversation.item.retrieve`, `.delete` and `.truncate`: the client's edits of the conversation.

OpenAI's rules, quoted from its event reference:

- retrieve: "The server will respond with a `conversation.item.retrieved` event, unless
  the item does not exist in the conversation history, in which case the server will
  respond with an error." User audio is not kept, so a retrieved turn carries its
  transcript but no `audio`.
- delete: the same, with `conversation.item.deleted`; the item leaves the LLM's view.
- truncate: "Only assistant message items can be truncated"; `content_index` "Set this
  to 0"; "If the audio_end_ms is greater than the actual audio duration, the server will
  respond with an error"; and "Truncating audio will delete the server-side text
  transcript to ensure there is not text in the context that hasn't been heard by the
  user." The transcript keeps the clauses whose audio had begun by `audio_end_ms`.

An item of the response still in progress is not edited: cancel the response first.
"""

from __future__ import annotations

import dataclasses

from dragoman.errors import InvalidValue
from dragoman.sessions.agent import events as out
from dragoman.sessions.agent.conversation import Conversation
from dragoman.sessions.agent.response import ResponseRun

#: Audio lengths are counted in samples and reported in whole ms: allow the rounding.
_ROUNDING_MS = 1.0


def apply(
    request: out.ItemRequest, conversation: Conversation, active: ResponseRun | None
) -> out.ServerEvent:
    """The event that answers `request`, the conversation changed accordingly; raises InvalidValue."""
    item = conversation.get(request.item_id)
    if item is None:
        raise InvalidValue(
            f"No item with id {request.item_id[:64]!r} is in the conversation.", param="item_id"
        )
    if isinstance(request, out.RetrieveItem):
        return out.ItemRetrieved(item)
    if active is not None and active.holds(request.item_id):
        raise InvalidValue(
            f"Item {request.item_id[:64]!r} belongs to the response in progress; cancel it first "
            "(response.cancel).",
            param="item_id",
        )
    if isinstance(request, out.DeleteItem):
        conversation.remove(request.item_id)
        return out.ItemDeleted(request.item_id)
    return _truncate(request, item, conversation)


def _truncate(request: out.TruncateItem, item: out.Item, conversation: Conversation) -> out.ItemTruncated:
    if not isinstance(item, out.Message) or item.role != "assistant":
        raise InvalidValue("Only assistant message items can be truncated.", param="item_id")
    if request.content_index != 0 or not item.content:
        raise InvalidValue(
            "An assistant message has one content part: content_index must be 0.", param="content_index"
        )
    audio = conversation.audio_of(request.item_id)
    if audio is None:
        raise InvalidValue("This assistant message has no audio to truncate.", param="item_id")
    if request.audio_end_ms > audio.duration_ms + _ROUNDING_MS:
        raise InvalidValue(
            f"audio_end_ms {request.audio_end_ms} is past the end of the item's audio "
            f"({audio.duration_ms:.0f} ms).",
            param="audio_end_ms",
        )
    played, heard = audio.cut(request.audio_end_ms)
    part = dataclasses.replace(item.content[0], transcript=heard)
    conversation.replace(dataclasses.replace(item, content=(part, *item.content[1:])))
    conversation.record_audio(request.item_id, played)
    return out.ItemTruncated(request.item_id, request.content_index, request.audio_end_ms)
