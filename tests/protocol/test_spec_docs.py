"""The specification documents match the code: protocol/README.md and protocol/asyncapi.yaml.

Every message type of the code is documented in both and nothing else is; every example decodes
(client) or passes the server-message checker (server); README's msgpack hex is the msgpack of its
JSON; and the AsyncAPI payload schemas accept the examples, the valid vectors and a sample of every
server message type, while refusing the invalid vectors a JSON schema can express.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import msgpack  # type: ignore[import-untyped]
import pytest
import yaml

import protocol
from protocol import ProtocolError, Subprotocol
from protocol.limits import MAX_PROFILE_RECENT
from tests.support.wire import VECTORS, frame_of, sample_server_messages

DOCS = Path(protocol.__file__).parent
README = (DOCS / "README.md").read_text(encoding="utf-8")
ASYNCAPI: dict[str, Any] = yaml.safe_load((DOCS / "asyncapi.yaml").read_text(encoding="utf-8"))

CLIENT_TYPES = set(protocol.CLIENT_MESSAGE_TYPES)
SERVER_TYPES = set(protocol.SERVER_MESSAGE_TYPES)


# --------------------------------------------------------------------------- README


def _section(title_prefix: str) -> str:
    start = README.index(f"\n## {title_prefix}")
    end = README.find("\n## ", start + 1)
    return README[start : end if end != -1 else None]


CLIENT_SECTION = _section("5. Client")
SERVER_SECTION = _section("6. Server")
_EXAMPLE = re.compile(r"```json\n(.*?)\n```\n\n```msgpack\n(.*?)\n```", re.DOTALL)


def _headings(section: str) -> set[str]:
    return set(re.findall(r"^### `([a-z_]+)`$", section, re.MULTILINE))


def _examples(section: str) -> list[tuple[dict[str, Any], bytes]]:
    return [(json.loads(text), bytes.fromhex(hex_text)) for text, hex_text in _EXAMPLE.findall(section)]


def test_readme_documents_exactly_the_message_types_of_the_code() -> None:
    assert _headings(CLIENT_SECTION) == CLIENT_TYPES
    assert _headings(SERVER_SECTION) == SERVER_TYPES


def test_readme_every_json_example_has_its_msgpack_twin() -> None:
    assert README.count("```json") == len(_EXAMPLE.findall(README))
    assert README.count("```msgpack") == README.count("```json")


def test_readme_has_an_example_of_every_message() -> None:
    assert {message["type"] for message, _ in _examples(CLIENT_SECTION)} == CLIENT_TYPES
    assert {message["type"] for message, _ in _examples(SERVER_SECTION)} == SERVER_TYPES


@pytest.mark.parametrize("subprotocol", list(Subprotocol), ids=lambda s: s.name)
def test_readme_client_examples_decode(subprotocol: Subprotocol) -> None:
    for message, packed in _examples(CLIENT_SECTION):
        assert msgpack.packb(message) == packed, message
        frame = packed if subprotocol is Subprotocol.MSGPACK else json.dumps(message)
        assert message["type"] == protocol.decode(frame, subprotocol).TYPE


def test_readme_server_examples_are_valid_server_messages() -> None:
    for message, packed in _examples(SERVER_SECTION):
        assert msgpack.packb(message) == packed, message
        protocol.validate_server_message(message)


def _documented_fields(kind: str) -> set[str]:
    """The fields the first table under ``### `kind``` names (``| `a`, `b` | ...`` names two); a type
    documented as "The same as `other`" without a table has the other's fields, but never an id."""
    start = SERVER_SECTION.index(f"\n### `{kind}`\n")
    end = SERVER_SECTION.find("\n### ", start + 1)
    text = SERVER_SECTION[start : end if end != -1 else None]
    rows = re.search(r"\n\| field \|.*?\n((?:\|.*\n)+)", text)
    if rows is None:
        same = re.search(r"The same as `([a-z_]+)`", text)
        assert same is not None, f"{kind}: no table of fields, and not 'the same as' another type"
        return _documented_fields(same.group(1)) - {"id"}
    first_cells = [row.split("|")[1] for row in rows.group(1).splitlines()[1:]]
    return {name for cell in first_cells for name in re.findall(r"`([a-z_]+)`", cell)}


@pytest.mark.parametrize("kind", sorted(SERVER_TYPES))
def test_readme_documents_the_fields_of_every_server_message(kind: str) -> None:
    required, optional = protocol.SERVER_MESSAGE_TYPES[kind].wire_fields()
    assert _documented_fields(kind) == required | optional


def test_readme_names_every_error_and_close_code() -> None:
    errors = _section("8. Errors")
    for code in protocol.ErrorCode:
        assert f"| `{code.value}` |" in errors
    closes = _section("9. Close codes")
    for close in protocol.CloseCode:
        assert f"| {int(close)} |" in closes


# --------------------------------------------------------------------------- AsyncAPI


def _resolve(ref: str) -> Any:
    node: Any = ASYNCAPI
    for part in ref.removeprefix("#/").split("/"):
        node = node[part]
    return node


def _operation_types(name: str) -> dict[str, dict[str, Any]]:
    operation = ASYNCAPI["operations"][name]
    messages = [_resolve(_resolve(ref["$ref"])["$ref"]) for ref in operation["messages"]]
    return {message["name"]: message for message in messages}


CLIENT_MESSAGES = _operation_types("receiveClientMessages")
SERVER_MESSAGES = _operation_types("sendServerMessages")


def test_asyncapi_is_version_3_on_the_ws_channel() -> None:
    assert ASYNCAPI["asyncapi"].startswith("3.")
    assert ASYNCAPI["channels"]["game"]["address"] == "/ws"
    assert ASYNCAPI["operations"]["receiveClientMessages"]["action"] == "receive"
    assert ASYNCAPI["operations"]["sendServerMessages"]["action"] == "send"


def test_asyncapi_documents_exactly_the_message_types_of_the_code() -> None:
    assert set(CLIENT_MESSAGES) == CLIENT_TYPES
    assert set(SERVER_MESSAGES) == SERVER_TYPES
    channel = ASYNCAPI["channels"]["game"]["messages"]
    assert {_resolve(ref["$ref"])["name"] for ref in channel.values()} == CLIENT_TYPES | SERVER_TYPES


def _payload_fields(schema: dict[str, Any]) -> tuple[frozenset[str], frozenset[str]]:
    """(required, optional) properties of an object schema, ``type`` aside."""
    schema = _resolve(schema["$ref"]) if "$ref" in schema else schema
    properties = set(schema["properties"]) - {"type"}
    required = set(schema.get("required", [])) - {"type"}
    return frozenset(required), frozenset(properties - required)


@pytest.mark.parametrize("kind", sorted(SERVER_TYPES))
def test_asyncapi_payloads_have_the_fields_of_every_server_message(kind: str) -> None:
    required, optional = protocol.SERVER_MESSAGE_TYPES[kind].wire_fields()
    assert _payload_fields(SERVER_MESSAGES[kind]["payload"]) == (required, optional)


#: The AsyncAPI schemas of the parts of server messages, and their classes.
PART_SCHEMAS: dict[
    str,
    type[protocol.Player]
    | type[protocol.GameRow]
    | type[protocol.PlayerRow]
    | type[protocol.ProfileGame]
    | type[protocol.LiveGame],
] = {
    "Player": protocol.Player,
    "GameRow": protocol.GameRow,
    "PlayerRow": protocol.PlayerRow,
    "ProfileGame": protocol.ProfileGame,
    "LiveGame": protocol.LiveGame,
}


@pytest.mark.parametrize("name", sorted(PART_SCHEMAS))
def test_asyncapi_part_schemas_have_the_fields_of_their_classes(name: str) -> None:
    required, optional = PART_SCHEMAS[name].wire_fields()
    assert _payload_fields(ASYNCAPI["components"]["schemas"][name]) == (required, optional)


class SchemaError(Exception):
    pass


def check_schema(value: Any, schema: dict[str, Any], path: str = "$") -> None:
    """A small JSON-schema checker: the keywords asyncapi.yaml uses, strict about integers."""
    if "$ref" in schema:
        check_schema(value, _resolve(schema["$ref"]), path)
        return
    kind = schema.get("type")
    kinds = {
        "object": lambda v: type(v) is dict,
        "array": lambda v: type(v) is list,
        "string": lambda v: type(v) is str,
        "integer": lambda v: type(v) is int,
        "number": lambda v: type(v) in (int, float),
        "boolean": lambda v: type(v) is bool,
        "null": lambda v: v is None,
    }
    if kind is not None and not kinds[kind](value):
        raise SchemaError(f"{path}: {value!r} is not {kind}")
    if "const" in schema and (value != schema["const"] or type(value) is not type(schema["const"])):
        raise SchemaError(f"{path}: {value!r} is not {schema['const']!r}")
    if "enum" in schema and not any(value == e and type(value) is type(e) for e in schema["enum"]):
        raise SchemaError(f"{path}: {value!r} not in {schema['enum']}")
    if type(value) is str:
        if not schema.get("minLength", 0) <= len(value) <= schema.get("maxLength", 10**9):
            raise SchemaError(f"{path}: length of {value!r}")
        if "pattern" in schema and not re.search(schema["pattern"], value):
            raise SchemaError(f"{path}: {value!r} does not match {schema['pattern']}")
    if type(value) in (int, float) and not schema.get("minimum", -(10**30)) <= value <= schema.get(
        "maximum", 10**30
    ):
        raise SchemaError(f"{path}: {value!r} out of range")
    if type(value) is list:
        if not schema.get("minItems", 0) <= len(value) <= schema.get("maxItems", 10**9):
            raise SchemaError(f"{path}: {len(value)} items")
        for index, item in enumerate(value):
            if "items" in schema:
                check_schema(item, schema["items"], f"{path}[{index}]")
    if type(value) is dict:
        properties = schema.get("properties", {})
        for name in schema.get("required", []):
            if name not in value:
                raise SchemaError(f"{path}: missing {name}")
        for name, item in value.items():
            if name in properties:
                check_schema(item, properties[name], f"{path}.{name}")
            elif schema.get("additionalProperties") is False:
                raise SchemaError(f"{path}: unexpected {name!r}")
    if "oneOf" in schema:
        matches = sum(_matches(value, option, path) for option in schema["oneOf"])
        if matches != 1:
            raise SchemaError(f"{path}: {value!r} matches {matches} of oneOf")
    if "anyOf" in schema and not any(_matches(value, option, path) for option in schema["anyOf"]):
        raise SchemaError(f"{path}: {value!r} matches nothing of anyOf")
    if "not" in schema and _matches(value, schema["not"], path):
        raise SchemaError(f"{path}: {value!r} matches a 'not'")


def _matches(value: Any, schema: dict[str, Any], path: str) -> bool:
    try:
        check_schema(value, schema, path)
    except SchemaError:
        return False
    return True


@pytest.mark.parametrize("kind", sorted(CLIENT_TYPES))
def test_asyncapi_client_examples_decode_and_fit_their_schema(kind: str) -> None:
    message = CLIENT_MESSAGES[kind]
    assert message["examples"]
    for example in message["examples"]:
        payload = example["payload"]
        check_schema(payload, message["payload"])
        for subprotocol in Subprotocol:
            assert kind == protocol.decode(frame_of(payload, subprotocol), subprotocol).TYPE


@pytest.mark.parametrize("kind", sorted(SERVER_TYPES))
def test_asyncapi_server_examples_are_valid_and_fit_their_schema(kind: str) -> None:
    message = SERVER_MESSAGES[kind]
    assert message["examples"]
    for example in message["examples"]:
        protocol.validate_server_message(example["payload"])
        check_schema(example["payload"], message["payload"])


@pytest.mark.parametrize("case", VECTORS["valid"], ids=[case["name"] for case in VECTORS["valid"]])
def test_asyncapi_schemas_accept_every_valid_vector(case: dict[str, Any]) -> None:
    check_schema(case["message"], CLIENT_MESSAGES[case["message"]["type"]]["payload"])


#: Invalid vectors that only the server's code refuses: rules a JSON schema cannot say (or that
#: asyncapi.yaml leaves to its descriptions).
BEYOND_SCHEMA = {
    "hello: name with a newline",
    "hello: name with a NUL",
    "hello: name with a right-to-left override",
    "hello: name starting with a blank",
    "hello: name ending with a blank",
    "hello: name only blanks",
    "new_game: a code contradicted by cells",
    "leaderboard: an impossible date",
}


@pytest.mark.parametrize("case", VECTORS["invalid"], ids=[case["name"] for case in VECTORS["invalid"]])
def test_asyncapi_schemas_refuse_the_invalid_vectors_they_can(case: dict[str, Any]) -> None:
    message = case["message"]
    kind = message.get("type") if isinstance(message, dict) else None
    if kind not in CLIENT_MESSAGES:
        return  # not a map, or no known type: no schema applies
    fits = _matches(message, CLIENT_MESSAGES[kind]["payload"], "$")
    if case["name"] in BEYOND_SCHEMA:
        assert fits, f"{case['name']} is refused by the schema now: take it off BEYOND_SCHEMA"
    elif case["error"] == "unsupported_version":
        assert not fits
    else:
        assert not fits, f"asyncapi.yaml accepts the invalid vector {case['name']!r}"
        with pytest.raises(ProtocolError):
            protocol.parse_client_message(message)


def test_asyncapi_server_schemas_accept_every_sample_server_message() -> None:
    for message in sample_server_messages():
        check_schema(message, SERVER_MESSAGES[str(message["type"])]["payload"])


# --------------------------------------------------------------------------- promises kept in step
# Each promise below was found missing or contradicted by a client written from the spec alone. The
# documents are checked here; tests/server/test_spec_promises.py checks the server keeps them.


def _words(text: str) -> str:
    return " ".join(text.split())


def test_resign_sends_no_diff_in_every_document() -> None:
    keeping = _words(_section("7. Keeping"))
    assert "**resign sends no `ack` and no `diff`**" in keeping
    assert 'set `status` from it: `"won"` when `won` is true, else `"resigned"`' in keeping
    assert "no `ack` and no `diff` (the board and `v` do not change)" in _words(CLIENT_SECTION)
    assert "no ack or diff" in CLIENT_MESSAGES["resign"]["description"]
    assert "A resign sends no ack and no diff" in _words(SERVER_MESSAGES["game_over"]["description"])


def test_malformed_before_hello_is_a_bad_request_in_every_document() -> None:
    connecting = _words(_section("1. Connecting"))
    assert (
        "A valid request other than `hello` sent before it is answered with an `unauthorized`" in connecting
    )
    assert "a malformed message is a `bad_request`" in connecting
    assert "whether or not `hello` came first" in connecting
    unauthorized = next(
        line for line in _section("8. Errors").splitlines() if line.startswith("| `unauthorized`")
    )
    assert (
        "a valid request other than `hello` before `hello` (an invalid one is a `bad_request` first"
        in unauthorized
    )
    info = _words(ASYNCAPI["info"]["description"])
    assert "a malformed one gets bad_request whether or not hello came first" in info


def test_valid_vectors_are_the_ones_the_server_accepts_in_every_document() -> None:
    vectors = _words(_section("13. Test vectors"))
    assert "The server refuses none of them as `bad_request`" in vectors
    assert "the leaderboard `after` is a `next` cursor this server sent" in vectors
    assert "never bad_request" in VECTORS["description"]
    assert "an `after` that is not a `next` this server sent" in _words(CLIENT_SECTION)
    for case in VECTORS["valid"]:
        if case["message"]["type"] == "leaderboard" and "after" in case["message"]:
            assert "cursor this server sent" in case["name"]


def test_profile_recent_has_one_bound_everywhere() -> None:
    from server.storage.leaderboards import RECENT_GAMES  # what the server reads

    assert RECENT_GAMES == MAX_PROFILE_RECENT
    recent = next(line for line in SERVER_SECTION.splitlines() if line.startswith("| `recent` |"))
    assert recent.endswith(f"newest first, at most {MAX_PROFILE_RECENT} |")
    profile = SERVER_MESSAGES["profile"]
    assert profile["payload"]["properties"]["recent"]["maxItems"] == MAX_PROFILE_RECENT
    assert f"newest first, at most {MAX_PROFILE_RECENT}." in _words(profile["description"])
    message = next(m for m in sample_server_messages() if m["type"] == "profile" and m["recent"])
    games = message["recent"]
    assert isinstance(games, list)
    with pytest.raises(ProtocolError):
        protocol.validate_server_message({**message, "recent": [games[0]] * (MAX_PROFILE_RECENT + 1)})
    protocol.validate_server_message({**message, "recent": [games[0]] * MAX_PROFILE_RECENT})


def test_readme_describes_deals_json_as_it_is() -> None:
    deals = json.loads((DOCS / "vectors" / "deals.json").read_text(encoding="utf-8"))
    section = _words(_section("13. Test vectors"))
    assert set(deals) == {"spec", "vectors"}
    assert "a JSON object with `spec`" in section and f"`vectors`, {len(deals['vectors'])} entries" in section
    for key in {key for entry in deals["vectors"] for key in entry}:
        assert f"`{key}`" in section, key
    numbers = {entry["number"] for entry in deals["vectors"]}
    assert len(numbers) == 10 and {0, 2**35 - 1, 160, 1, 2**34} <= numbers
    assert "the deal numbers 0, 2^35-1, 160 (`AAAAAFA`), 1, 2^34 and five seeded random ones" in section
    for number in numbers:
        assert sorted(e["cell_count"] for e in deals["vectors"] if e["number"] == number) == [2, 4, 8]
    c2 = next(entry for entry in deals["vectors"] if entry["code"] == "EO1-C2-AAAAAAA")
    shuffle = _words(_section("11. Game codes"))
    assert f"In `EO1-C2-AAAAAAA` the cells are `{' '.join(c2['cells'])}`" in shuffle
    assert f"column 3 is `{' '.join(c2['tableau'][2])}`" in shuffle
    assert f"column 4 is `{' '.join(c2['tableau'][3])}`" in shuffle


def test_readme_describes_moves_json_as_it_is() -> None:
    moves = json.loads((DOCS / "vectors" / "moves.json").read_text(encoding="utf-8"))
    section = _words(_section("13. Test vectors"))
    assert set(moves) == {"description", "positions"}
    assert f"`description` and `positions`, {len(moves['positions'])} entries" in section
    keys = {key for position in moves["positions"] for key in position}
    keys |= {
        key
        for p in moves["positions"]
        for kind in ("moves", "illegal", "taps", "double_taps")
        for e in p[kind]
        for key in e
    }
    keys |= {key for p in moves["positions"] for key in p["largest_group"]}
    for key in keys:
        assert f"`{key}`" in section, key
    openings = [
        p["name"].removeprefix("opening ") for p in moves["positions"] if p["name"].startswith("opening ")
    ]
    assert "the opening of `" + "`, `".join(openings[:-1]) + f"` and `{openings[-1]}`" in section
    assert '`"<from>-<to>[:<n>] is illegal: <reason>"`' in section


def _ids(value: Any) -> list[str]:
    """Every game and player id in a message: the ``game`` fields, ``games`` lists, players' ``id``."""
    found: list[str] = []
    if isinstance(value, dict):
        for key, item in value.items():
            if key in ("game", "around") and isinstance(item, str):
                found.append(item)
            elif key == "games" and isinstance(item, list):
                found += [entry for entry in item if isinstance(entry, str)]
            elif key == "player" and isinstance(item, str):
                found.append(item)
            elif key == "player" and isinstance(item, dict):
                found.append(item["id"])
            found += _ids(item)
    elif isinstance(value, list):
        for item in value:
            found += _ids(item)
    return found


def test_ids_are_opaque_and_no_example_suggests_a_prefix() -> None:
    """A client once took `g_`/`p_` for a kind prefix: the examples show ids as the server makes them."""
    assert "**opaque**: compare them whole" in _section("3. Common values")
    examples = [message for message, _ in _examples(README)]
    examples += [e["payload"] for m in {**CLIENT_MESSAGES, **SERVER_MESSAGES}.values() for e in m["examples"]]
    examples += [case["message"] for case in VECTORS["valid"]]
    ids = {identifier for example in examples for identifier in _ids(example)}
    assert len(ids) >= 5
    assert not [identifier for identifier in ids if re.match(r"[a-z]{1,3}_", identifier)]


def test_pacing_and_slots_say_the_server_defaults() -> None:
    """The figures of section 10's "Pacing" and "Slots" and section 1's keepalive are the server's."""
    from server.config import Settings
    from server.edge.transport import PING_INTERVAL

    defaults = Settings()
    limits = _words(_section("10. Limits"))
    burst, rate = defaults.rate_burst, int(defaults.rate_per_second)
    assert f"it holds {burst} tokens and refills at {rate} a second" in limits
    assert "Every frame the server reads takes one token **when it is read**" in limits
    assert (
        "and WebSocket control frames too (a ping, the pong to one of the server's pings, a close)" in limits
    )
    assert f"{1000 // rate} ms" in limits and f"stop sending for {burst // rate} seconds" in limits
    assert f"A connection has {defaults.max_games_per_connection} slots for open games" in limits
    assert f"and {defaults.max_watches_per_connection} for watched games" in limits
    assert f"When all {defaults.max_games_per_connection} are taken" in limits
    assert f"When all {defaults.max_watches_per_connection} are taken" in limits
    assert f"pings every {int(PING_INTERVAL)} seconds itself" in _words(_section("1. Connecting"))
    assert "pings and pongs included" in _words(_section("1. Connecting"))
