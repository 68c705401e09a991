"""The two generations of OpenAI's Realtime API, and how each writes an audio format.

Beta (`client.beta.realtime`, header `OpenAI-Beta: realtime=v1`) and GA
(`client.realtime`) share most event names; they differ in the session object,
in a few server event names (`response.audio.delta` in beta is
`response.output_audio.delta` in GA) and in how an audio format is written
(`"pcm16"` in beta, `{"type": "audio/pcm", "rate": 24000}` in GA).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

# The rates `{"type": "audio/pcm", "rate": N}` may name are audio's SUPPORTED_RATES.
# OpenAI's GA types allow only 24000 ("Only a 24kHz sample rate is supported"); the
# others are this server's extension.
#: What `"pcm16"` means in a transcription session: 16 kHz (the beta default here).
TRANSCRIPTION_PCM16_RATE = 16_000
#: What `"pcm16"` means in an agent session, as in OpenAI's beta types: "For `pcm16`, input
#: audio must be 16-bit PCM at a 24kHz sample rate, single channel (mono), and little-endian".
AGENT_PCM16_RATE = 24_000
#: OpenAI's GA `audio/pcm` rate, and every agent session's default in both directions.
GA_RATE = 24_000


class Generation(StrEnum):
    BETA = "beta"
    GA = "ga"


def generation_of(openai_beta_header: str) -> Generation:
    """`client.beta.realtime.connect` sends `OpenAI-Beta: realtime=v1`; GA clients send none."""
    return Generation.BETA if "realtime=v1" in openai_beta_header else Generation.GA


def default_input_rate(generation: Generation) -> int:
    """A transcription session's input rate: GA's audio/pcm is 24 kHz only; beta's pcm16 is 16 kHz here."""
    return GA_RATE if generation is Generation.GA else TRANSCRIPTION_PCM16_RATE


#: G.711 as each generation names it.
_G711_NAMES: dict[Generation, dict[str, Any]] = {
    Generation.GA: {"pcmu": {"type": "audio/pcmu"}, "pcma": {"type": "audio/pcma"}},
    Generation.BETA: {"pcmu": "g711_ulaw", "pcma": "g711_alaw"},
}


def format_for(
    generation: Generation, rate: int, pcm16_rate: int = TRANSCRIPTION_PCM16_RATE, codec: str = "pcm16"
) -> Any:
    """An audio format as the client's generation writes it: beta's "pcm16" where it means `rate`,
    and G.711 by its name."""
    if codec != "pcm16":
        return _G711_NAMES[generation][codec]
    if generation is Generation.BETA and rate == pcm16_rate:
        return "pcm16"
    return {"type": "audio/pcm", "rate": rate}
