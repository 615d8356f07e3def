"""Connection caps, origin policy and the throttled log, without sockets."""

from __future__ import annotations

import ipaddress
import logging

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from server import origins
from server.config import Settings
from server.edge import admission
from server.edge.admission import (
    AddressBudget,
    ConnectionCaps,
    ConnectionGate,
    ThrottledLog,
    open_files_budget,
)
from server.origins import OriginPolicy, TrustedProxies
from server.ratelimit import BucketsByKey


def test_caps_per_address_and_in_all() -> None:
    caps = ConnectionCaps(per_address=2, total=3)
    assert caps.admit("a") is None and caps.admit("a") is None
    assert "from a" in (caps.admit("a") or "")
    assert caps.admit("b") is None
    assert "3 connections open" in (caps.admit("c") or "")
    caps.release("a")
    assert caps.admit("c") is None
    assert caps.open_connections == 3 and caps.open_from("a") == 1


def test_caps_release_of_an_unknown_address_is_harmless() -> None:
    caps = ConnectionCaps(per_address=None, total=None)
    caps.release("nobody")
    assert caps.open_connections == 0
    assert all(caps.admit("a") is None for _ in range(10_000))


@pytest.mark.parametrize(
    ("setting", "origin", "host", "allowed"),
    [
        ("self,none", None, "h:1", True),
        ("self,none", "http://h:1", "h:1", True),
        ("self,none", "HTTPS://H:1", "h:1", True),
        ("self,none", "http://h:2", "h:1", False),
        ("self,none", "http://h:1", None, False),
        ("self,none", "null", "h:1", False),
        ("self,none", "ftp://h:1", "h:1", False),
        ("self", None, "h:1", False),
        ("none", "http://h:1", "h:1", False),
        ("https://a.example, https://b.example", "https://b.example", "h:1", True),
        ("https://a.example", "https://a.example.evil", "h:1", False),
        ("*", "http://anything", None, True),
        ("*", None, None, True),
    ],
)
def test_origin_policy(setting: str, origin: str | None, host: str | None, allowed: bool) -> None:
    assert OriginPolicy.parse(setting).allows(origin, host) is allowed


@pytest.mark.parametrize("setting", ["example.org", "https://a.example/path", "javascript:x"])
def test_origin_policy_rejects_malformed_entries(setting: str) -> None:
    with pytest.raises(ValueError, match="origin"):
        OriginPolicy.parse(setting)


def test_throttled_log_says_how_many_lines_it_left_out(caplog: pytest.LogCaptureFixture) -> None:
    now = [0.0]
    log = ThrottledLog(interval=1.0, clock=lambda: now[0])
    with caplog.at_level(logging.WARNING):
        assert log.warning("refused", "one")
        assert not log.warning("refused", "two")
        assert log.warning("other", "three")
        now[0] = 1.5
        assert log.warning("refused", "four")
    assert [record.getMessage() for record in caplog.records] == [
        "refused: one",
        "other: three",
        "refused: four (1 more since the last line)",
    ]


def test_open_files_budget_leaves_room_for_the_server() -> None:
    import resource

    budget = open_files_budget()
    assert 0 < budget < resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def test_caps_transfer_counts_the_client_behind_a_proxy() -> None:
    caps = ConnectionCaps(per_address=1, total=10)
    for _ in range(3):
        assert caps.admit("proxy", per_address=False) is None
    assert caps.transfer("proxy", "a") is None
    assert "from a" in (caps.transfer("proxy", "a") or "")
    assert caps.open_from("proxy") == 2 and caps.open_from("a") == 1 and caps.open_connections == 3
    assert caps.transfer("proxy", "proxy") is None


@pytest.mark.parametrize(
    ("peer", "header", "client"),
    [
        ("10.0.0.2", "1.2.3.4", "1.2.3.4"),
        ("10.0.0.2", "6.6.6.6, 1.2.3.4", "1.2.3.4"),  # the entries before the proxy's are the client's word
        ("10.0.0.2", " , ", "10.0.0.2"),
        ("10.0.0.2", None, "10.0.0.2"),
        ("172.20.0.5", "1.2.3.4", "1.2.3.4"),
        ("192.168.1.1", "1.2.3.4", "192.168.1.1"),  # not a trusted proxy: its header is ignored
        ("not-an-ip", "1.2.3.4", "not-an-ip"),
    ],
)
def test_trusted_proxies_name_the_client(peer: str, header: str | None, client: str) -> None:
    proxies = TrustedProxies.parse("10.0.0.2, 172.16.0.0/12")
    assert proxies.client_of(peer, header) == client


def test_trusted_proxies_reject_malformed_entries() -> None:
    assert TrustedProxies.parse("").networks == ()
    with pytest.raises(ValueError, match="haproxy"):
        TrustedProxies.parse("haproxy")


def test_an_accept_parses_no_address_without_proxies_and_each_peer_once_with_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 20, half-open sockets: every accept asked ``trusts``, and parsing the peer's address was
    half of the admission work per accept. Tried: 2,000 accepts of 150 peers (the attack's
    addresses), with no proxy trusted and with one."""
    parsed: list[str] = []
    real = ipaddress.ip_address

    def counted(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
        parsed.append(text)
        return real(text)

    monkeypatch.setattr(ipaddress, "ip_address", counted)
    origins._within.cache_clear()  # no peer parsed by an earlier test
    peers = [f"127.0.{200 + n // 250}.{1 + n % 250}" for n in range(150)]
    none, proxied = TrustedProxies(), TrustedProxies.parse("10.0.0.2, 127.0.200.0/30")
    assert not any(none.trusts(peers[n % 150]) for n in range(2000))
    assert parsed == []
    trusted = {peer for peer in (peers[n % 150] for n in range(2000)) if proxied.trusts(peer)}
    assert trusted == {"127.0.200.1", "127.0.200.2", "127.0.200.3"}
    assert sorted(parsed) == sorted(peers)


def test_gate_applies_the_per_address_cap_to_the_forwarded_client() -> None:
    gate = ConnectionGate(
        ConnectionCaps(per_address=1, total=None), TrustedProxies.parse("10.0.0.2"), ThrottledLog()
    )
    assert gate.accept("10.0.0.2") is None and gate.accept("10.0.0.2") is None  # a proxy is not capped
    assert gate.handshake("10.0.0.2", "1.1.1.1") == ("1.1.1.1", None)
    address, refused = gate.handshake("10.0.0.2", "1.1.1.1")
    assert address == "10.0.0.2" and refused is not None
    gate.release("1.1.1.1")
    gate.release(address)
    assert gate.caps.open_connections == 0
    assert gate.accept("9.9.9.9") is None and gate.accept("9.9.9.9") is not None


@pytest.mark.parametrize(
    ("values", "complaint"),
    [
        ({"max_connections": 0}, "--max-connections .*0 is not a number of at least 1"),
        ({"max_connections_per_address": -1}, "--max-connections-per-address"),
        ({"new_connections_per_address_per_second": 0.0}, "--new-connections-per-address-per-second"),
        ({"guests_per_address_per_minute": 0}, "--guests-per-address-per-minute"),
        ({"page_requests_per_address_per_second": 0.0}, "--page-requests-per-address-per-second"),
        ({"address_frame_share": 0.0}, "--address-frame-share .*0.0 is not a positive number"),
        ({"address_frame_share": float("inf")}, "--address-frame-share"),
        ({"max_unfinished_games_per_player": 0}, "--max-unfinished-games-per-player"),
        ({"abandon_after": 0.0}, "--abandon-after"),
        ({"welcome_games": 0}, "--welcome-games .*0 is not in 1..100"),
        ({"welcome_games": 101}, "--welcome-games .*101 is not in 1..100"),
        ({"origins": "example.org"}, "--origins .*origin 'example.org'"),
        ({"trusted_proxies": "proxy.local"}, "--trusted-proxies .*trusted proxy 'proxy.local'"),
    ],
)
def test_settings_refuse_nonsense_limits(values: dict[str, object], complaint: str) -> None:
    with pytest.raises(ValueError, match=complaint):
        Settings(**values)  # type: ignore[arg-type]


def test_settings_take_off_for_the_limits_that_can_be_off() -> None:
    off = Settings(
        max_connections_per_address=None,
        guests_per_address_per_minute=None,
        max_unfinished_games_per_player=None,
        abandon_after=None,
        address_frame_share=None,
    )
    assert off.guests_per_address_per_minute is None and off.address_frame_share is None


def test_gate_lets_a_bounded_number_of_refused_sockets_linger() -> None:
    gate = ConnectionGate(ConnectionCaps(per_address=None, total=0), TrustedProxies(), ThrottledLog())
    assert all(gate.start_lingering() for _ in range(gate.LINGER_SLOTS))
    assert not gate.start_lingering()
    gate.stop_lingering()
    assert gate.start_lingering()


class FakeHalfOpen:
    """A connection still in its opening handshake, as the transport hands it to the gate."""

    def __init__(self, gate: ConnectionGate, address: str) -> None:
        self.address = address
        self.evicted = False
        self.admitted = gate.accept(address, self) is None

    def evict(self) -> None:
        self.evicted = True


def _gate(per_address: int | None, total: int | None, clock: list[float]) -> ConnectionGate:
    return ConnectionGate(
        ConnectionCaps(per_address=per_address, total=total),
        TrustedProxies(),
        ThrottledLog(),
        clock=lambda: clock[0],
    )


def test_gate_makes_room_for_a_newcomer_by_dropping_the_oldest_half_open_connection() -> None:
    """At the global cap a new connection is admitted in place of the oldest connection still in its
    handshake (evicted, its place given back); a connection past its handshake is never evicted, so
    with none half-open the newcomer is refused."""
    clock = [0.0]
    gate = _gate(None, 3, clock)
    first, second, third = (FakeHalfOpen(gate, address) for address in ("a", "b", "c"))
    gate.opened(first)  # its request came: no longer half-open
    newcomer = FakeHalfOpen(gate, "d")
    assert newcomer.admitted and second.evicted and not first.evicted and not third.evicted
    assert gate.caps.open_connections == 3 and gate.caps.open_from("b") == 0
    gate.opened(third)
    gate.opened(newcomer)
    assert not FakeHalfOpen(gate, "e").admitted
    assert gate.caps.open_connections == 3


def test_gate_never_evicts_for_an_address_at_its_own_cap() -> None:
    """An address at its per-address cap is refused before anyone is evicted for it."""
    clock = [0.0]
    gate = _gate(2, 3, clock)
    held = [FakeHalfOpen(gate, "a"), FakeHalfOpen(gate, "a"), FakeHalfOpen(gate, "b")]
    assert not FakeHalfOpen(gate, "a").admitted
    assert not any(connection.evicted for connection in held)
    assert FakeHalfOpen(gate, "c").admitted and held[0].evicted


def test_gate_under_pressure_drops_no_one_until_a_place_is_needed() -> None:
    """Past a quarter of the cap half-open the gate is under pressure (new connections get the
    shorter open timeout), yet accepts below the cap drop nobody, however old the half-open
    connections (each one dropped is an attacker's reconnect: churn); once the cap is reached, each
    newcomer takes the place of the oldest half-open connection, one for one."""
    clock = [0.0]
    gate = _gate(None, 40, clock)
    early = [FakeHalfOpen(gate, f"10.0.0.{index}") for index in range(10)]
    assert not gate.under_pressure()
    early += [FakeHalfOpen(gate, f"10.0.0.{index}") for index in range(10, 12)]
    assert gate.under_pressure()
    clock[0] = 10 * gate.PRESSED_OPEN_TIMEOUT
    later = [FakeHalfOpen(gate, f"10.0.1.{index}") for index in range(40 - 12)]
    assert all(connection.admitted for connection in early + later)
    assert not any(connection.evicted for connection in early + later)
    assert gate.caps.full
    newcomers = [FakeHalfOpen(gate, f"10.0.2.{index}") for index in range(3)]
    assert all(newcomer.admitted for newcomer in newcomers)
    assert [connection.evicted for connection in early[:4]] == [True, True, True, False]
    assert not any(connection.evicted for connection in early[4:] + later + newcomers)


def test_gate_under_pressure_caps_the_half_open_connections_of_one_address() -> None:
    """Under pressure an address holding ``HALF_OPEN_PER_ADDRESS`` half-open connections is refused
    (cheaply: nobody is evicted for it) while a new address still gets in; once one of its
    connections is past its handshake it may open another."""
    clock = [0.0]
    gate = _gate(None, 40, clock)
    held = [FakeHalfOpen(gate, f"10.0.0.{index}") for index in range(8)]
    crowd = [FakeHalfOpen(gate, "10.0.1.1") for _ in range(gate.HALF_OPEN_PER_ADDRESS)]
    assert gate.under_pressure() and all(connection.admitted for connection in crowd)
    assert not FakeHalfOpen(gate, "10.0.1.1").admitted
    assert FakeHalfOpen(gate, "10.0.2.1").admitted
    gate.opened(crowd[0])
    assert FakeHalfOpen(gate, "10.0.1.1").admitted
    assert not any(connection.evicted for connection in held + crowd)


def test_gate_shares_one_frame_bucket_among_an_address_s_connections() -> None:
    """One bucket per address while it has a connection open, forgotten with its last one (a
    reconnect after a 1008 waits for the arrivals penalty instead); taken from only while the
    address has more connections open than the budget is worth; None when the budget is off."""
    clock = [0.0]
    gate = ConnectionGate(
        ConnectionCaps(per_address=None, total=None),
        TrustedProxies(),
        ThrottledLog(),
        frames=AddressBudget(10.0, 20, 1.5),
    )
    one, other = FakeHalfOpen(gate, "a"), FakeHalfOpen(gate, "b")
    bucket = gate.frame_bucket("a")
    assert bucket is not None and gate.frame_bucket("a") is bucket and gate.frame_bucket("b") is not bucket
    assert not bucket.crowded  # one connection: its own bucket bounds it
    two = FakeHalfOpen(gate, "a")
    assert bucket.crowded
    gate.release("a", one)
    assert gate.frame_bucket("a") is bucket and not bucket.crowded
    gate.release("a", two)
    assert FakeHalfOpen(gate, "a").admitted and gate.frame_bucket("a") is not bucket
    assert other.admitted and _gate(None, None, clock).frame_bucket("a") is None


def test_gate_counts_the_client_behind_a_proxy_toward_its_frame_budget() -> None:
    gate = ConnectionGate(
        ConnectionCaps(per_address=None, total=None),
        TrustedProxies.parse("10.0.0.2"),
        ThrottledLog(),
        frames=AddressBudget(10.0, 20, 1.0),
    )
    for _ in range(2):
        assert gate.accept("10.0.0.2") is None
    assert gate.handshake("10.0.0.2", "1.1.1.1") == ("1.1.1.1", None)
    bucket = gate.frame_bucket("1.1.1.1")
    assert bucket is not None and not bucket.crowded
    assert gate.handshake("10.0.0.2", "1.1.1.1") == ("1.1.1.1", None)
    assert bucket.crowded and gate.frame_bucket("10.0.0.2") is not bucket


def test_gate_gives_back_the_token_of_a_connection_answered_from_memory() -> None:
    """A page load is a connection per file: one that turns out to be a GET answered from memory does
    not count as a new connection while its address's page budget lasts; past that budget, as
    without one, it counts; the token is taken at accept all the same (a socket that never sends
    its request pays), and a penalty is not paid back by page requests."""
    clock = [0.0]

    def gate(pages: BucketsByKey | None) -> ConnectionGate:
        return ConnectionGate(
            ConnectionCaps(per_address=None, total=None),
            TrustedProxies.parse("10.0.0.2"),
            ThrottledLog(),
            BucketsByKey(1.0, 2, lambda: clock[0]),
            pages=pages,
            clock=lambda: clock[0],
        )

    def page_request(gate: ConnectionGate, address: str) -> bool:
        admitted = gate.accept(address) is None
        if admitted:
            gate.answered_from_memory(address)
        return admitted

    paged = gate(BucketsByKey(1.0, 6, lambda: clock[0]))
    assert [page_request(paged, "a") for _ in range(9)] == [True] * 8 + [False]  # 6 given back, then 2
    assert page_request(paged, "b")  # another address: its own budgets
    clock[0] += 1.0  # a token and a page request back: the page request gives its token back
    assert [page_request(paged, "a") for _ in range(3)] == [True, True, False]

    unpaged = gate(None)
    assert [page_request(unpaged, "a") for _ in range(3)] == [True, True, False]

    clock[0] += 10.0
    paged.penalize("a")  # closed for flooding: 2 tokens owed, 3 s until its next connection
    paged.answered_from_memory("a")  # a page request admitted before the penalty: nothing back
    clock[0] += 2.9
    assert not page_request(paged, "a")
    clock[0] += 0.2
    assert page_request(paged, "a")

    for _ in range(10):  # a trusted proxy's connections are counted at their handshake: none taken
        assert page_request(paged, "10.0.0.2")


@pytest.mark.parametrize(
    ("address", "prefix", "key"),
    [
        ("203.0.113.7", 64, "203.0.113.7"),  # IPv4: itself
        ("::ffff:203.0.113.7", 64, "203.0.113.7"),  # an IPv4 peer of a dual-stack socket
        ("2001:db8:1:2::5", 64, "2001:db8:1:2::/64"),
        ("2001:db8:1:2:ffff:ffff:ffff:ffff", 64, "2001:db8:1:2::/64"),
        ("2001:0DB8:0001:0002:0:0:0:9", 64, "2001:db8:1:2::/64"),  # spelled otherwise, by a proxy
        ("2001:db8:1:3::5", 64, "2001:db8:1:3::/64"),  # the next /64: another subscriber
        ("2001:db8:1:2ff::5", 56, "2001:db8:1:200::/56"),
        ("2001:0db8::0001", 128, "2001:db8::1/128"),  # each address alone, one spelling
        ("fe80::1%eth0", 64, "fe80::/64"),  # a link-local address's zone dropped
        ("::1", 64, "::/64"),
        ("64:ff9b::203.0.113.7", 64, "203.0.113.7"),  # an IPv4 client behind a NAT64 translator
        ("64:ff9b::1:203.0.113.7", 64, "64:ff9b::/64"),  # not the /96: an IPv6 address
        ("not-an-address", 64, "not-an-address"),  # a proxy's garbled header: itself
        ("2001:db8::1:80:", 64, "2001:db8::1:80:"),
    ],
)
def test_source_key_counts_an_ipv6_address_by_its_network(address: str, prefix: int, key: str) -> None:
    assert admission.source_key(address, prefix) == key


@given(
    st.integers(0, 2**128 - 1),
    st.integers(0, 2**128 - 1),
    st.integers(1, 128),
)
def test_two_ipv6_addresses_share_a_key_exactly_when_their_networks_match(
    a: int, b: int, prefix: int
) -> None:
    first, second = (str(ipaddress.IPv6Address(n)) for n in (a, b))
    nat64 = ipaddress.IPv6Network("64:ff9b::/96")
    assume(
        all(
            ipaddress.IPv6Address(n).ipv4_mapped is None and ipaddress.IPv6Address(n) not in nat64
            for n in (a, b)
        )
    )
    same_network = a >> (128 - prefix) == b >> (128 - prefix)
    assert (admission.source_key(first, prefix) == admission.source_key(second, prefix)) == same_network
    assert ipaddress.IPv6Address(a) in ipaddress.IPv6Network(admission.source_key(first, prefix))


def test_gate_counts_the_addresses_of_one_ipv6_network_as_one() -> None:
    """One machine holds a whole /64: each connection from a new address of it (the botnet attack
    from one host) counts toward one cap, one new-connection budget, one penalty and one frame
    budget; the next /64 is another client."""
    clock = [0.0]
    gate = ConnectionGate(
        ConnectionCaps(per_address=3, total=None),
        TrustedProxies(),
        ThrottledLog(),
        BucketsByKey(1.0, 4, lambda: clock[0]),
        frames=AddressBudget(10.0, 20, 1.0),
        clock=lambda: clock[0],
    )
    host = [f"2001:db8:1:2:{n:x}::1" for n in range(1, 9)]
    assert [gate.accept(peer) is None for peer in host[:4]] == [True, True, True, False]  # the cap, 3
    assert gate.key_of(host[7]) == "2001:db8:1:2::/64" and gate.caps.open_from("2001:db8:1:2::/64") == 3
    bucket = gate.frame_bucket(gate.key_of(host[0]))
    assert bucket is not None and bucket is gate.frame_bucket(gate.key_of(host[5])) and bucket.crowded
    assert gate.accept("2001:db8:1:3::1") is None  # another /64
    gate.release(gate.key_of(host[0]))
    assert gate.accept(host[5]) is not None  # the /64's new-connection budget (4 at once) is spent
    clock[0] += 2.0
    gate.penalize(gate.key_of(host[1]))  # one of its connections closed for flooding: the /64 waits
    clock[0] += 1.0
    assert gate.accept(host[6]) is not None
    assert gate.accept("2001:db8:1:3::2") is None


def test_gate_keys_a_forwarded_ipv6_client_by_its_network_and_trusts_an_ipv6_proxy_exactly() -> None:
    gate = ConnectionGate(
        ConnectionCaps(per_address=1, total=None), TrustedProxies.parse("2001:db8:ff::2"), ThrottledLog()
    )
    for _ in range(3):
        assert gate.accept("2001:db8:ff::2") is None  # the proxy itself, not capped
    assert gate.handshake("2001:db8:ff::2", "2001:db8:1:2::7") == ("2001:db8:1:2::/64", None)
    address, refused = gate.handshake("2001:db8:ff::2", "2001:db8:1:2::8")  # the same /64: at its cap
    assert address == "2001:db8:ff::2" and refused is not None  # still counted under the proxy
    assert gate.handshake("2001:db8:ff::2", "::ffff:198.51.100.4") == ("198.51.100.4", None)
    # A neighbour of the proxy in its /64 is another client: the proxy's connections are counted
    # under its exact address, not against the neighbour's cap; the header it sends names nobody.
    assert gate.accept("2001:db8:ff::3") is None
    assert gate.handshake("2001:db8:ff::3", "2001:db8:9::1") == ("2001:db8:ff::/64", None)
    assert gate.accept("2001:db8:ff::4") is not None  # the neighbours' /64 at its cap of 1
    # A client the proxy forwards from the proxy's own /64 is counted apart, within its limits.
    address, refused = gate.handshake("2001:db8:ff::2", "2001:db8:ff::9")
    assert address == "2001:db8:ff::2" and refused is not None  # that /64 is at its cap: refused
