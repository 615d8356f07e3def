"""The shared test vectors (protocol/vectors/client_messages.json) through both codecs."""

from __future__ import annotations

from typing import Any

import pytest

import protocol
from protocol import ProtocolError, Subprotocol
from tests.support.wire import VECTORS, decoded_form, frame_of, raw_frame

BOTH = list(Subprotocol)


def _ids(cases: list[dict[str, Any]]) -> list[str]:
    return [case["name"] for case in cases]


def test_vectors_cover_every_client_message_type() -> None:
    valid = {case["message"]["type"] for case in VECTORS["valid"]}
    invalid = {
        case["message"].get("type") for case in VECTORS["invalid"] if isinstance(case["message"], dict)
    } - {None}
    assert valid == set(protocol.CLIENT_MESSAGE_TYPES)
    assert set(protocol.CLIENT_MESSAGE_TYPES) <= invalid


def test_vectors_names_are_unique() -> None:
    names = [case["name"] for key in ("valid", "invalid", "frames") for case in VECTORS[key]]
    assert len(names) == len(set(names))


@pytest.mark.parametrize("subprotocol", BOTH, ids=lambda s: s.name)
@pytest.mark.parametrize("case", VECTORS["valid"], ids=_ids(VECTORS["valid"]))
def test_valid_vector_decodes(case: dict[str, Any], subprotocol: Subprotocol) -> None:
    request = protocol.decode(frame_of(case["message"], subprotocol), subprotocol)
    assert decoded_form(request) == case["decoded"]


@pytest.mark.parametrize("subprotocol", BOTH, ids=lambda s: s.name)
@pytest.mark.parametrize("case", VECTORS["valid"], ids=_ids(VECTORS["valid"]))
def test_valid_vector_round_trips_through_to_wire(case: dict[str, Any], subprotocol: Subprotocol) -> None:
    request = protocol.decode(frame_of(case["message"], subprotocol), subprotocol)
    assert protocol.decode(frame_of(request.to_wire(), subprotocol), subprotocol) == request


@pytest.mark.parametrize("subprotocol", BOTH, ids=lambda s: s.name)
@pytest.mark.parametrize("case", VECTORS["invalid"], ids=_ids(VECTORS["invalid"]))
def test_invalid_vector_is_refused(case: dict[str, Any], subprotocol: Subprotocol) -> None:
    with pytest.raises(ProtocolError) as caught:
        protocol.decode(frame_of(case["message"], subprotocol), subprotocol)
    assert (caught.value.code, caught.value.request_id, caught.value.close_code) == (
        case["error"],
        case["id"],
        None,
    )


@pytest.mark.parametrize("case", VECTORS["frames"], ids=_ids(VECTORS["frames"]))
def test_frame_vector(case: dict[str, Any]) -> None:
    subprotocol = Subprotocol(case["subprotocol"])
    frame = raw_frame(case)
    if case.get("valid"):
        assert isinstance(
            protocol.decode(frame, subprotocol, max_size=case.get("max_size")),
            tuple(protocol.CLIENT_MESSAGE_TYPES.values()),
        )
        return
    with pytest.raises(ProtocolError) as caught:
        protocol.decode(frame, subprotocol, max_size=case.get("max_size"))
    assert (caught.value.code, caught.value.close_code, caught.value.request_id) == (
        case["error"],
        case["close"],
        case["id"],
    )


@pytest.mark.parametrize("case", VECTORS["invalid"][:20], ids=_ids(VECTORS["invalid"][:20]))
def test_error_reply_of_invalid_vector_is_a_valid_server_message(case: dict[str, Any]) -> None:
    with pytest.raises(ProtocolError) as caught:
        protocol.decode(frame_of(case["message"], Subprotocol.JSON), Subprotocol.JSON)
    protocol.validate_server_message(protocol.ErrorReply.of(caught.value).to_wire())
