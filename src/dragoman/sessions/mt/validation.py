"""Checks on MT protocol v1 `init` and `update` events beyond their wire shape.

Error codes. MT protocol v1 defines four: bad_protocol, unsupported_direction, busy and
processing_failed. Everything the client got wrong is `bad_protocol`; an
unsupported direction is `unsupported_direction` with the `supported` list. An
update the client got wrong (seq or clock going backwards, a timestamp after the
clock, an utterance_id out of order) is answered with `bad_protocol` and dropped,
and the session stays open with its state untouched. `processing_failed` is kept
for our own failures: the reference client treats it as "retry this state later",
which would loop forever on a client bug, while any other code makes it reconnect,
re-sending its history and shown prefix. That reconnect is the right recovery when
client and server disagree about the stream, so a client error should cause it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from dragoman.errors import ClientError, InvalidValue
from dragoman.languages import primary_subtag
from dragoman.sessions.mt.events import PROTOCOL_VERSION, Error, ErrorCode, Init, Update
from dragoman.streaming.alignatt import AlignAttParams

#: Clock comparisons tolerate float noise from clients that compute ms differently.
CLOCK_TOLERANCE_MS = 1e-3
#: Longest context_text, history entry or accepted_target_prefix, in characters.
MAX_TEXT_CHARS = 4000
#: At most this many history pairs are kept from init (the reference client sends 8).
MAX_HISTORY_PAIRS = 16


@dataclass(frozen=True)
class _Knob:
    field: str
    kind: type
    low: float
    high: float


#: Client `overrides` that apply (MT protocol v1's CLIENT_OVERRIDE_WHITELIST); unknown keys are
#: ignored silently, a listed key with a bad value is a bad_protocol error.
#:   translation_alignatt_frontier_margin         int 0..8: source positions held at the end
#:   translation_alignatt_inaccessible_ms         number 0..60000: committed words this recent
#:                                                count as tail
#:   translation_alignatt_hold_back_target_units  int 0..8: target units held after the cut
#:   translation_alignatt_unsegmented_hold_back   int 0..8: more held for zh, ja, ...
#:   translation_alignatt_hold_articles           bool: never end a partial commit on an article
#:   translation_alignatt_min_emit_target_units   int 0..16: smallest commit worth sending
#:   translation_alignatt_max_draft_tokens        int 1..128: tokens per streaming draft
#:   translation_alignatt_commit_fast_path        bool: re-cut cached drafts on ASR commits
#:   translation_alignatt_stop_at_frontier        bool: end drafts soon after the frontier
#:   translation_alignatt_past_frontier_tokens    int 0..128: tokens drafted past it
#:   translation_history_pairs                    int 0..16: earlier utterances in the prompt
CLIENT_OVERRIDE_WHITELIST: Mapping[str, _Knob] = {
    "translation_alignatt_frontier_margin": _Knob("frontier_margin", int, 0, 8),
    "translation_alignatt_inaccessible_ms": _Knob("inaccessible_ms", float, 0, 60_000),
    "translation_alignatt_hold_back_target_units": _Knob("hold_back_target_units", int, 0, 8),
    "translation_alignatt_unsegmented_hold_back": _Knob("unsegmented_hold_back", int, 0, 8),
    "translation_alignatt_hold_articles": _Knob("hold_articles", bool, 0, 1),
    "translation_alignatt_min_emit_target_units": _Knob("min_emit_target_units", int, 0, 16),
    "translation_alignatt_max_draft_tokens": _Knob("max_draft_tokens", int, 1, 128),
    "translation_alignatt_commit_fast_path": _Knob("commit_fast_path", bool, 0, 1),
    "translation_alignatt_stop_at_frontier": _Knob("stop_at_frontier", bool, 0, 1),
    "translation_alignatt_past_frontier_tokens": _Knob("past_frontier_tokens", int, 0, 128),
    "translation_history_pairs": _Knob("history_pairs", int, 0, MAX_HISTORY_PAIRS),
}


def _bad(message: str, param: str | None = None) -> InvalidValue:
    return InvalidValue(message, code=ErrorCode.BAD_PROTOCOL.value, param=param)


def apply_overrides(params: AlignAttParams, overrides: Mapping[str, Any]) -> AlignAttParams:
    changes: dict[str, Any] = {}
    for key, value in overrides.items():
        knob = CLIENT_OVERRIDE_WHITELIST.get(key)
        if knob is None:
            continue
        if knob.kind is bool:
            ok = isinstance(value, bool)
        elif knob.kind is int:
            ok = isinstance(value, int) and not isinstance(value, bool)
        else:
            ok = isinstance(value, int | float) and not isinstance(value, bool)
        if not ok or (knob.kind is not bool and not knob.low <= value <= knob.high):
            kind = "true or false" if knob.kind is bool else f"a number in [{knob.low:g}, {knob.high:g}]"
            raise _bad(f"overrides.{key} must be {kind}", param=f"overrides.{key}")
        changes[knob.field] = knob.kind(value)
    return replace(params, **changes)


def as_overrides(params: AlignAttParams) -> dict[str, object]:
    """`params` as MT protocol v1 `overrides`: every knob, for a node that runs the policy."""
    return {key: getattr(params, knob.field) for key, knob in CLIENT_OVERRIDE_WHITELIST.items()}


@dataclass(frozen=True)
class SessionSetup:
    source_lang: str
    target_lang: str
    direction: str
    preset: str
    params: AlignAttParams
    context_text: str | None
    history: tuple[tuple[str, str], ...]
    accepted_target_prefix: str


def resolve_init(
    init: Init,
    *,
    directions: Sequence[str],
    presets: Mapping[str, AlignAttParams],
    default_preset: str,
) -> SessionSetup:
    """Validate `init` against what the server serves; raises InvalidValue with the wire code."""
    if init.protocol_version != PROTOCOL_VERSION:
        raise _bad(
            f"protocol_version {init.protocol_version} is not supported; this server speaks "
            f"{PROTOCOL_VERSION}",
            param="protocol_version",
        )
    source, target = primary_subtag(init.source_lang), primary_subtag(init.target_lang)
    direction = f"{source}-{target}"
    if direction not in directions:
        raise InvalidValue(
            f"direction {direction} is not supported; supported: {', '.join(directions)}",
            code=ErrorCode.UNSUPPORTED_DIRECTION.value,
            param="target_lang",
        )
    preset = init.preset or default_preset
    if preset not in presets:
        raise _bad(f"unknown preset {preset[:40]!r}; known: {', '.join(sorted(presets))}", param="preset")
    texts = [init.context_text or "", init.accepted_target_prefix]
    texts += [text for pair in init.history for text in pair]
    if any(len(text) > MAX_TEXT_CHARS for text in texts):
        raise _bad(
            f"context_text, history entries and accepted_target_prefix are limited to "
            f"{MAX_TEXT_CHARS} characters"
        )
    history = tuple((src.strip(), tgt.strip()) for src, tgt in init.history if src.strip() and tgt.strip())
    return SessionSetup(
        source_lang=source,
        target_lang=target,
        direction=direction,
        preset=preset,
        params=apply_overrides(presets[preset], init.overrides),
        context_text=(init.context_text or "").strip() or None,
        history=history[-MAX_HISTORY_PAIRS:],
        # The reference client strips what it shows, and compares our committed_text with it.
        accepted_target_prefix=init.accepted_target_prefix.strip(),
    )


def refusal(exc: ClientError, directions: Sequence[str]) -> Error:
    """The `error` answering an init that `resolve_init` refused with `exc`."""
    code = _wire_code(exc)
    supported = tuple(directions) if code is ErrorCode.UNSUPPORTED_DIRECTION else None
    return Error(code, exc.message, supported=supported)


def _wire_code(exc: ClientError) -> ErrorCode:
    try:
        return ErrorCode(exc.code)
    except ValueError:
        return ErrorCode.BAD_PROTOCOL


def check_update(update: Update, *, last_seq: int | None, last_clock_ms: float | None) -> None:
    """Checks that need no utterance state; raises InvalidValue (bad_protocol)."""
    if last_seq is not None and update.seq <= last_seq:
        raise _bad(f"seq must increase: got {update.seq} after {last_seq}", param="seq")
    if last_clock_ms is not None and update.clock_ms < last_clock_ms - CLOCK_TOLERANCE_MS:
        raise _bad(f"clock_ms is monotone: got {update.clock_ms:g} after {last_clock_ms:g}", param="clock_ms")
    for index, word in enumerate(update.words):
        if word.start_ms is not None and word.end_ms is not None and word.start_ms > word.end_ms:
            raise _bad(f"words[{index}] starts after it ends", param=f"words[{index}]")
        if word.end_ms is not None and word.end_ms > update.clock_ms + CLOCK_TOLERANCE_MS:
            raise _bad(
                f"clock_ms {update.clock_ms:g} is before the end of committed word {index} "
                f"({word.end_ms:g}); it must be at least the largest committed end_ms",
                param="clock_ms",
            )
