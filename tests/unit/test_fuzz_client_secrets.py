"""A property-based fuzzer for the two key endpoints, `POST /v1/realtime/client_secrets` and
`POST /v1/realtime/translations/client_secrets`, in-process (Starlette's test client).

Bodies are valid requests, valid requests mutated (`fuzz_strategies.mutated`: a field
dropped, retyped or added at any depth), any JSON value, or bytes that are not JSON. The
properties: the server never fails (the test client re-raises what the route raises); a
refusal is a 400 in OpenAI's error shape, an `invalid_request_error` with a short message;
a key minted is answered as the SDK's response type reads it, and opens the session it names.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from fastapi import FastAPI
from fastapi.testclient import TestClient
from hypothesis import given
from hypothesis import strategies as st
from openai.types.realtime import ClientSecretCreateResponse, RealtimeTranslationClientSecretCreateResponse

from dragoman.sessions.translation.config import Languages
from dragoman.transports.client_secrets import ClientSecretStore, client_secrets_router
from tests.unit.fuzz_strategies import FUZZ, dumps, json_values, mutated

MAX_MESSAGE = 600
AGENT, TRANSLATION = "/v1/realtime/client_secrets", "/v1/realtime/translations/client_secrets"
RESPONSES: dict[str, Any] = {
    AGENT: ClientSecretCreateResponse,
    TRANSLATION: RealtimeTranslationClientSecretCreateResponse,
}

expires_after = st.fixed_dictionaries(
    {"anchor": st.just("created_at"), "seconds": st.sampled_from([10, 60, 600, 7200])}
)
agent_session = st.one_of(
    st.fixed_dictionaries(
        {"type": st.just("realtime")},
        optional={
            "model": st.sampled_from(["gpt-realtime", "dragoman-agent"]),
            "instructions": st.text(max_size=20),
            "output_modalities": st.sampled_from([["audio"], ["text"]]),
            "audio": st.just(
                {"output": {"voice": "alloy"}, "input": {"turn_detection": {"type": "server_vad"}}}
            ),
        },
    ),
    st.fixed_dictionaries(
        {"type": st.just("transcription")},
        optional={"audio": st.just({"input": {"transcription": {"model": "whisper-1", "language": "en"}}})},
    ),
)
translation_session = st.fixed_dictionaries(
    {"model": st.sampled_from(["gpt-realtime-translate", "dragoman-interpreter"])},
    optional={
        "audio": st.fixed_dictionaries(
            {},
            optional={
                "output": st.fixed_dictionaries({"language": st.sampled_from(["de", "it", "en", "it-IT"])}),
                "input": st.fixed_dictionaries(
                    {},
                    optional={
                        "transcription": st.one_of(st.none(), st.just({"model": "whisper"})),
                        "noise_reduction": st.one_of(st.none(), st.just({"type": "far_field"})),
                    },
                ),
            },
        )
    },
)


def requests(session: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[tuple[bool, str | bytes]]:
    """(whether the request is one OpenAI's schema takes, its body)."""
    valid = st.fixed_dictionaries({"session": session}, optional={"expires_after": expires_after})
    return st.one_of(
        valid.map(lambda body: (True, dumps(body))),
        st.tuples(st.just(False), mutated(valid).map(dumps)),
        st.tuples(st.just(False), mutated(valid).map(dumps)),
        st.tuples(st.just(False), json_values.map(dumps)),
        st.tuples(st.just(False), st.binary(max_size=40)),
        st.tuples(
            st.just(False),
            st.sampled_from([b"", b"{", b"\xff\xfe", b'{"session": ' + b"[" * 5000 + b"]" * 5000 + b"}"]),
        ),
    )


def client(store: ClientSecretStore) -> TestClient:
    app = FastAPI()
    app.include_router(client_secrets_router(store, "de", lambda: Languages.of(["en-de", "en-it", "de-en"])))
    return TestClient(app)


def answered_well(store: ClientSecretStore, path: str, request: tuple[bool, str | bytes]) -> None:
    schema_valid, body = request
    answer = client(store).post(path, content=body, headers={"Content-Type": "application/json"})
    assert answer.status_code in (200, 400), (answer.status_code, answer.text)
    if answer.status_code == 400:
        error = answer.json()["error"]
        assert error["type"] == "invalid_request_error", error
        assert isinstance(error["message"], str) and 0 < len(error["message"]) <= MAX_MESSAGE
        return
    answered = answer.json()  # JSON by the standard: no NaN or Infinity in it
    json.dumps(answered, allow_nan=False)
    if schema_valid:
        # The session echoed is the one asked for: for a request OpenAI's schema takes, an
        # answer its SDK reads. (A lenient read, such as a turn_detection with no type, is
        # echoed as it came.)
        RESPONSES[path].model_validate(answered)
    bound = asyncio.run(store.redeem(answered["value"]))
    assert bound is not None, "a key minted opens its session"
    assert bound.session["type"] == answered["session"]["type"], "the session the answer names"


@FUZZ
@given(requests(agent_session))
def test_any_body_for_an_agent_or_transcription_key_is_answered_well(
    request: tuple[bool, str | bytes],
) -> None:
    answered_well(ClientSecretStore(), AGENT, request)


@FUZZ
@given(requests(translation_session))
def test_any_body_for_a_translation_key_is_answered_well(request: tuple[bool, str | bytes]) -> None:
    answered_well(ClientSecretStore(), TRANSLATION, request)
