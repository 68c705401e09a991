"""A property-based fuzzer for the SDP offers of `POST /v1/realtime/calls` (and the translation
calls): a browser's offer with lines dropped, cut, garbled, repeated or given odd values.

The property: `check_offer` takes the offer, and then aiortc can parse it, or refuses it as the
client's fault (a 400 naming `sdp`), never anything else. aiortc's parser fails malformed lines with AssertionError,
KeyError, IndexError, AttributeError and TypeError besides ValueError, and those had reached
the call's setup as a server error with a logged traceback. The request around the offer is
fuzzed too (`read_offer`): the offer as `application/sdp`, or a multipart form whose `session`
part is JSON of any kind (deeper than Python's recursion, NaN, not an object) or cut short.
"""

from __future__ import annotations

from typing import Any

from aiortc.sdp import SessionDescription
from fastapi import FastAPI, Request
from fastapi.testclient import TestClient
from hypothesis import example, given
from hypothesis import strategies as st

from dragoman.errors import ClientError, InvalidValue
from dragoman.transports.webrtc.calls import read_offer
from dragoman.transports.webrtc.peer import check_offer
from tests.unit.fuzz_strategies import FUZZ

#: An offer as Chrome writes one for OpenAI's WebRTC guide: audio, then the events' data channel.
BROWSER_OFFER = "\r\n".join(
    [
        "v=0",
        "o=- 4611731400430051336 2 IN IP4 127.0.0.1",
        "s=-",
        "t=0 0",
        "a=group:BUNDLE 0 1",
        "a=extmap-allow-mixed",
        "a=msid-semantic: WMS 6e3d2a1b",
        "m=audio 9 UDP/TLS/RTP/SAVPF 111 63 9 0 8 13 110 126",
        "c=IN IP4 0.0.0.0",
        "a=rtcp:9 IN IP4 0.0.0.0",
        "a=ice-ufrag:Yx3m",
        "a=ice-pwd:b4Sx6l1Qm5NqY8v7Z0c2d3e4",
        "a=ice-options:trickle",
        "a=fingerprint:sha-256 3C:4A:9F:01:7E:22:B1:C4:55:6D:80:19:AA:3B:FE:02:71:C9:8D:44:10:E6:5B:37:92:0F:AD:61:28:CB:7E:43",
        "a=setup:actpass",
        "a=mid:0",
        "a=extmap:1 urn:ietf:params:rtp-hdrext:ssrc-audio-level",
        "a=sendrecv",
        "a=msid:6e3d2a1b 9c1f7e2d",
        "a=rtcp-mux",
        "a=rtpmap:111 opus/48000/2",
        "a=rtcp-fb:111 transport-cc",
        "a=fmtp:111 minptime=10;useinbandfec=1",
        "a=rtpmap:63 red/48000/2",
        "a=fmtp:63 111/111",
        "a=rtpmap:9 G722/8000",
        "a=rtpmap:0 PCMU/8000",
        "a=rtpmap:8 PCMA/8000",
        "a=rtpmap:13 CN/8000",
        "a=rtpmap:110 telephone-event/48000",
        "a=rtpmap:126 telephone-event/8000",
        "a=ssrc:1001 cname:4TOk42mSjXCkVIa6",
        "m=application 9 UDP/DTLS/SCTP webrtc-datachannel",
        "c=IN IP4 0.0.0.0",
        "a=ice-ufrag:Yx3m",
        "a=ice-pwd:b4Sx6l1Qm5NqY8v7Z0c2d3e4",
        "a=ice-options:trickle",
        "a=fingerprint:sha-256 3C:4A:9F:01:7E:22:B1:C4:55:6D:80:19:AA:3B:FE:02:71:C9:8D:44:10:E6:5B:37:92:0F:AD:61:28:CB:7E:43",
        "a=setup:actpass",
        "a=mid:1",
        "a=sctp-port:5000",
        "a=max-message-size:262144",
        "",
    ]
)
LINES = BROWSER_OFFER.split("\r\n")
ODD_VALUES = ["", "a", "0", "-1", "x y z", "99999999999999999999", ":", "opus/abc", "111 opus", "\x00"]


@st.composite
def damaged_offers(draw: st.DrawFn) -> str:
    lines = list(LINES)
    for _ in range(draw(st.integers(1, 4))):
        if not lines:
            break
        at = draw(st.integers(0, len(lines) - 1))
        kind = draw(st.sampled_from(["drop", "cut", "garble", "repeat", "value"]))
        if kind == "drop":
            del lines[at]
        elif kind == "cut":
            lines[at] = lines[at][: draw(st.integers(0, len(lines[at])))]
        elif kind == "garble" and lines[at]:
            i = draw(st.integers(0, len(lines[at]) - 1))
            lines[at] = lines[at][:i] + draw(st.sampled_from(list("x: /=0-9a "))) + lines[at][i + 1 :]
        elif kind == "repeat":
            lines.insert(at, lines[at])
        elif "=" in lines[at]:
            head, _, rest = (
                lines[at].partition(":") if lines[at].startswith("a=") else (lines[at][:1], "", "")
            )
            lines[at] = (head + ":" if rest else lines[at][:2]) + draw(st.sampled_from(ODD_VALUES))
    return "\r\n".join(lines)


@FUZZ
@given(damaged_offers())
@example("v=0\r\nm=audio 9 UDP/TLS/RTP/SAVPF 111\r\na=rtpmap:111\r\n")  # an IndexError in aiortc
@example(BROWSER_OFFER.replace("a=mid:0", "a=mid"))
def test_any_offer_is_taken_or_refused_as_the_clients_fault(offer: str) -> None:
    try:
        check_offer(offer)
    except InvalidValue as refused:
        assert refused.param == "sdp" and refused.status == 400
        return
    # What is taken, the peer connection can read (`setRemoteDescription` parses it so).
    SessionDescription.parse(offer)


def test_the_browsers_offer_itself_is_taken() -> None:
    check_offer(BROWSER_OFFER)


# -- the request: the offer as application/sdp, or a multipart form with a session part ------

BOUNDARY = "callboundary"
#: Session parts: the SDK's, and JSON a parser chokes on (too deep for Python's recursion, NaN,
#: not an object, not JSON).
SESSION_PARTS = (
    '{"type": "realtime", "instructions": "Be brief."}',
    '{"audio": {"output": {"voice": "alloy"}}}',
    "[" * 100_000 + "]" * 100_000,
    '{"a": ' * 5000 + "1" + "}" * 5000,
    '{"temperature": NaN}',
    '{"x": Infinity}',
    "[1, 2]",
    '"realtime"',
    "not json",
    "",
)


def form(parts: list[tuple[str, str]]) -> bytes:
    body = b"".join(
        f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'.encode()
        for name, value in parts
    )
    return body + f"--{BOUNDARY}--\r\n".encode()


def offer_reader() -> FastAPI:
    """The endpoints' offer reading alone, behind a route that says what it read."""
    served = FastAPI()

    @served.post("/offer")
    async def read(request: Request) -> dict[str, Any]:
        try:
            sdp, session = await read_offer(request)
        except ClientError as refused:
            return {"refused": refused.status, "param": refused.param}
        return {"sdp": sdp, "session": session}

    return served


requests = st.one_of(
    st.tuples(st.just("application/sdp"), damaged_offers().map(str.encode)),
    st.tuples(
        st.sampled_from([f"multipart/form-data; boundary={BOUNDARY}", "multipart/form-data"]),
        st.builds(
            lambda offer, session, cut: (form([("sdp", offer), ("session", session)]))[: cut or None],
            st.one_of(st.just(BROWSER_OFFER), damaged_offers()),
            st.one_of(st.sampled_from(SESSION_PARTS), st.text(max_size=60)),
            st.one_of(st.just(0), st.integers(1, 400)),
        ),
    ),
    st.tuples(st.sampled_from(["application/json", "text/plain", "audio/wav"]), st.binary(max_size=200)),
)


@FUZZ
@given(requests)
@example(
    (f"multipart/form-data; boundary={BOUNDARY}", form([("sdp", BROWSER_OFFER), ("session", "[" * 100_000)]))
)
@example(("multipart/form-data", b"--x\r\nContent-Disposition: form-data\r\n\r\n"))
def test_any_call_request_is_read_or_refused_as_the_clients_fault(request: tuple[str, bytes]) -> None:
    content_type, body = request
    with TestClient(offer_reader()) as client:  # a route that raises fails the test here
        response = client.post("/offer", content=body, headers={"content-type": content_type})
    assert response.status_code == 200
    answer = response.json()
    if "refused" in answer:
        assert answer["refused"] == 400 and answer["param"] in ("sdp", "session", None)
    else:
        SessionDescription.parse(answer["sdp"])  # what is taken, the peer connection reads
        assert answer["session"] is None or isinstance(answer["session"], dict)
