"""A call's peer connection (aiortc): its ICE servers, and the answer to a caller's offer.

ICE servers come from `DRAGOMAN_ICE_SERVERS` (or the reference agent's name for it,
`SPEECH_TO_SPEECH_ICE_SERVERS`): a JSON list, each entry a URL or an object shaped like
the browser's `RTCIceServer` (`{"urls": ..., "username": ..., "credential": ...}`).
Without it aiortc's defaults apply (a public STUN server). A TURN server is needed where
the caller cannot reach the server's UDP ports directly: behind a symmetric NAT, or a
server in a container without published UDP ports.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

from aiortc import RTCConfiguration, RTCIceServer, RTCPeerConnection, RTCRtpSender, RTCSessionDescription
from aiortc.exceptions import InvalidAccessError, OperationError
from aiortc.sdp import SessionDescription

from dragoman.errors import InvalidValue

ICE_SERVERS_VARIABLES = ("DRAGOMAN_ICE_SERVERS", "SPEECH_TO_SPEECH_ICE_SERVERS")


def ice_servers(environ: Mapping[str, str] = os.environ) -> list[RTCIceServer] | None:
    """The configured ICE servers; None (aiortc's defaults) when no variable is set.

    Raises ValueError for a value that is not such a list (the server then does not start).
    """
    for name in ICE_SERVERS_VARIABLES:
        raw = environ.get(name)
        if raw is not None and raw.strip():
            return _parse(name, raw)
    return None


def _parse(name: str, raw: str) -> list[RTCIceServer]:
    try:
        entries = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{name} is not JSON: {exc}") from None
    if not isinstance(entries, list):
        raise ValueError(f"{name} must be a JSON list of ICE servers")
    servers = []
    for entry in entries:
        if isinstance(entry, str):
            entry = {"urls": entry}
        if not isinstance(entry, dict) or not isinstance(entry.get("urls"), str | list):
            raise ValueError(f"{name}: each ICE server is a URL or an object with 'urls', got {entry!r}")
        servers.append(
            RTCIceServer(
                urls=entry["urls"], username=entry.get("username"), credential=entry.get("credential")
            )
        )
    return servers


def new_peer(servers: list[RTCIceServer] | None) -> RTCPeerConnection:
    return RTCPeerConnection(RTCConfiguration(iceServers=servers))


def check_offer(sdp: str) -> None:
    """Refuse what is not an SDP offer with audio before any peer connection is made."""
    if not sdp.lstrip().startswith("v=0") or "\nm=audio " not in sdp.replace("\r\n", "\n"):
        raise InvalidValue(
            "The body must be an SDP offer with an audio section (Content-Type: application/sdp).",
            param="sdp",
        )
    try:
        SessionDescription.parse(sdp)
    except Exception:  # aiortc's parser asserts, indexes and looks up as it reads
        # A malformed line fails it with AssertionError, KeyError, IndexError, AttributeError or
        # TypeError as well as ValueError: whichever, it is the offer's fault, not the server's.
        raise InvalidValue("The SDP offer cannot be parsed.", param="sdp") from None


def has_data_channel(sdp: str) -> bool:
    return "\nm=application " in sdp.replace("\r\n", "\n")


async def answer(peer: RTCPeerConnection, offer: str, outbound: Any) -> str:
    """Take the caller's offer, send `outbound` on its audio, and return the SDP answer.

    Opus is the only audio codec offered back ("Opus at 48 kHz over RTP"); aiortc gathers
    every ICE candidate before the answer is made, so the answer holds them all.
    """
    # The server's transceiver comes first, so the offer's audio section takes it, with Opus.
    transceiver = peer.addTransceiver(outbound, direction="sendrecv")
    codecs = RTCRtpSender.getCapabilities("audio").codecs
    transceiver.setCodecPreferences([c for c in codecs if c.mimeType.lower() == "audio/opus"])
    try:
        await peer.setRemoteDescription(RTCSessionDescription(sdp=offer, type="offer"))
    except (ValueError, InvalidAccessError, OperationError) as exc:  # unparsable, or without Opus
        raise InvalidValue(
            "The SDP offer cannot be answered: it must be a valid offer of Opus audio.", param="sdp"
        ) from exc
    await peer.setLocalDescription(await peer.createAnswer())
    return str(peer.localDescription.sdp)
