"""WebRTC call ids name their replica, for a load balancer to route a call's `DELETE` and
sideband on (`--replica-id`); a server with no replica id keeps OpenAI's plain `rtc_` ids."""

from __future__ import annotations

import re

import pytest
from pydantic import ValidationError

from dragoman.cli import _overrides, _parser
from dragoman.config import Settings, load_settings

pytest.importorskip("aiortc")

from dragoman.transports.webrtc.calls import Calls


def test_a_replicas_call_ids_name_it_and_differ() -> None:
    calls = Calls([], "front-2")
    ids = {calls.new_id() for _ in range(100)}
    assert len(ids) == 100
    assert all(re.fullmatch(r"rtc_front-2_[0-9a-f]{20}", call_id) for call_id in ids), ids


def test_without_a_replica_id_a_call_id_is_rtc_and_random() -> None:
    assert re.fullmatch(r"rtc_[0-9a-f]{20}", Calls([]).new_id())


def test_the_replica_id_comes_from_the_flag_or_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    args = _parser().parse_args(["serve", "--replica-id", "b"])
    assert load_settings(args.config, **_overrides(args)).replica_id == "b"
    monkeypatch.setenv("DRAGOMAN_REPLICA_ID", "pod-7")
    assert Settings().replica_id == "pod-7"


@pytest.mark.parametrize("bad", ["a_b", "", "x" * 33, "a b", "ä"])
def test_a_replica_id_the_balancer_could_not_split_off_is_refused(bad: str) -> None:
    # `_` ends the replica in the call id; nginx's map reads up to it.
    with pytest.raises(ValidationError):
        Settings(replica_id=bad)
