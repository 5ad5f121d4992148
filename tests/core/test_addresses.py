# ruff: noqa: S104 - 0.0.0.0 here is an expected reading, not an address to bind
"""Which addresses a webhook may reach: an IPv6 form that embeds an IPv4 address is
judged by that IPv4 address, not by whether Python calls the IPv6 address global."""

from __future__ import annotations

from ipaddress import IPv4Address, IPv6Address

import pytest

from hashee.core.addresses import embedded_ipv4, is_public_address

# (address, what it embeds, public?) — the IPv4 readings are what a translator or tunnel
# would deliver the packet to.
EMBEDDED = [
    # IPv4-mapped ::ffff:a.b.c.d
    ("::ffff:127.0.0.1", ["127.0.0.1"], False),
    ("::ffff:10.0.0.7", ["10.0.0.7"], False),
    ("::ffff:169.254.169.254", ["169.254.169.254"], False),
    ("::ffff:8.8.8.8", ["8.8.8.8"], True),
    # IPv4-compatible ::a.b.c.d (deprecated; :: and ::1 read as 0.0.0.0 and 0.0.0.1)
    ("::127.0.0.1", ["127.0.0.1"], False),
    ("::10.0.0.7", ["10.0.0.7"], False),
    ("::1", ["0.0.0.1"], False),
    ("::", ["0.0.0.0"], False),
    ("::8.8.8.8", ["8.8.8.8"], True),
    # IPv4-translated ::ffff:0:a.b.c.d (SIIT)
    ("::ffff:0:127.0.0.1", ["127.0.0.1"], False),
    ("::ffff:0:8.8.8.8", ["8.8.8.8"], True),
    # NAT64 well-known prefix 64:ff9b::/96
    ("64:ff9b::127.0.0.1", ["127.0.0.1"], False),
    ("64:ff9b::10.0.0.7", ["10.0.0.7"], False),
    ("64:ff9b::169.254.169.254", ["169.254.169.254"], False),
    ("64:ff9b::100.64.0.1", ["100.64.0.1"], False),
    ("64:ff9b::8.8.8.8", ["8.8.8.8"], True),
    # NAT64 local-use prefix 64:ff9b:1::/48: every RFC 6052 reading whose suffix is zero
    ("64:ff9b:1::10.0.0.7", ["10.0.0.7"], False),  # /96
    ("64:ff9b:1::8.8.8.8", ["8.8.8.8"], True),  # /96
    ("64:ff9b:1:a00:0:100::", ["0.0.0.0", "0.1.0.0", "0.0.1.0", "10.0.0.1"], False),  # /48 of 10.0.0.1
    ("64:ff9b:1:a:0:1::", ["0.0.0.0", "0.0.1.0", "10.0.0.1"], False),  # /56 of 10.0.0.1
    ("64:ff9b:1:0:a:0:100:0", ["1.0.0.0", "10.0.0.1"], False),  # /64 of 10.0.0.1
    ("64:ff9b:1:0:7f:0:100:0", ["1.0.0.0", "127.0.0.1"], False),  # /64 of 127.0.0.1
    # 6to4 2002:AABB:CCDD::/48
    ("2002:7f00:1::", ["127.0.0.1"], False),
    ("2002:a00:7::1", ["10.0.0.7"], False),
    ("2002:a9fe:a9fe:1::1", ["169.254.169.254"], False),
    ("2002:808:808::1", ["8.8.8.8"], True),
    # Teredo 2001:0:SERVER:flags:port:~CLIENT
    ("2001:0:4136:e378:8000:63bf:80ff:fffe", ["65.54.227.120", "127.0.0.1"], False),  # client loopback
    ("2001:0:4136:e378:8000:63bf:f5ff:fff8", ["65.54.227.120", "10.0.0.7"], False),  # client private
    ("2001:0:a00:7:8000:63bf:f7f7:fbfb", ["10.0.0.7", "8.8.4.4"], False),  # server private
    ("2001:0:4136:e378:8000:63bf:f7f7:fbfb", ["65.54.227.120", "8.8.4.4"], True),
]


@pytest.mark.parametrize(("address", "embedded", "public"), EMBEDDED, ids=[row[0] for row in EMBEDDED])
def test_an_ipv6_form_that_embeds_ipv4_is_judged_by_the_ipv4_address(
        address: str, embedded: list[str], public: bool) -> None:
    assert embedded_ipv4(IPv6Address(address)) == [IPv4Address(a) for a in embedded]
    assert is_public_address(address) is public


@pytest.mark.parametrize(("address", "public"), [
    ("8.8.8.8", True), ("2606:4700:4700::1111", True),
    ("127.0.0.1", False), ("10.0.0.7", False), ("169.254.169.254", False), ("100.64.0.1", False),
    ("224.0.0.1", False), ("fe80::1", False), ("fd00::7", False), ("ff0e::1", False), ("2001:db8::1", False),
], ids=str)
def test_any_other_address_is_public_only_when_global_unicast(address: str, public: bool) -> None:
    assert is_public_address(address) is public


# Closed by shape (issue 23): Python calls each of these global, or reads no IPv4 in it.
# (address, public?, why)
BY_SHAPE: list[tuple[str, bool, str]] = [
    # IPv4 special-purpose registry, globally reachable or not
    ("192.0.0.8", False, "IPv4 dummy address (RFC 7600), in 192.0.0.0/24"),
    ("192.0.0.9", False, "PCP anycast, in 192.0.0.0/24"),
    ("192.0.0.170", False, "NAT64 discovery, in 192.0.0.0/24"),
    ("192.88.99.1", False, "6to4 relay anycast (RFC 7526)"),
    ("192.88.99.2", False, "6a44 relay anycast"),
    ("198.18.0.1", False, "benchmarking"),
    ("198.19.255.254", False, "benchmarking, end of the /15"),
    ("192.31.196.1", False, "AS112-v4"),
    ("192.52.193.1", False, "AMT"),
    ("192.175.48.1", False, "direct delegation AS112"),
    ("240.0.0.1", False, "reserved"),
    ("255.255.255.255", False, "limited broadcast"),
    ("192.0.1.1", True, "just outside 192.0.0.0/24"),
    ("192.88.98.255", True, "just below 192.88.99.0/24"),
    ("198.20.0.1", True, "just above 198.18.0.0/15"),
    # IPv6: special-purpose, deprecated or outside global unicast
    ("fec0::1", False, "site-local (deprecated, RFC 3879)"),
    ("feff::1", False, "site-local, end of fec0::/10"),
    ("100::1", False, "discard-only"),
    ("2001:1::1", False, "IETF protocol assignments, 2001::/23"),
    ("2001:20::1", False, "ORCHIDv2"),
    ("2620:4f:8000::1", False, "direct delegation AS112"),
    ("3fff::1", False, "documentation (RFC 9637)"),
    ("5f00::1", False, "SRv6 SIDs, outside 2000::/3"),
    ("4000::1", False, "outside 2000::/3"),
    ("64:ff9b:0:1::1", False, "no NAT64 prefix, and outside 2000::/3"),
    ("2001:200::1", True, "just outside 2001::/23"),
    # ISATAP interface ids (0000:5efe / 0200:5efe + IPv4), any prefix
    ("::5efe:7f00:1", False, "ISATAP of 127.0.0.1 with no prefix"),
    ("fe80::5efe:127.0.0.1", False, "link-local ISATAP of 127.0.0.1"),
    ("2001:db8::200:5efe:7f00:1", False, "ISATAP of 127.0.0.1, u/l bit set"),
    ("2606:4700::5efe:a00:7", False, "public prefix, ISATAP of 10.0.0.7"),
    ("2606:4700::200:5efe:c0a8:101", False, "public prefix, ISATAP of 192.168.1.1"),
    ("2606:4700::5efe:a9fe:a9fe", False, "public prefix, ISATAP of the metadata address"),
    ("2606:4700::5efe:808:808", True, "public prefix, ISATAP of 8.8.8.8"),
    ("2002:808:808::5efe:7f00:1", False, "6to4 of 8.8.8.8 into an ISATAP id of 127.0.0.1"),
]


@pytest.mark.parametrize(("address", "public"), [(a, p) for a, p, _ in BY_SHAPE],
                         ids=[f"{a} ({why})" for a, _, why in BY_SHAPE])
def test_special_purpose_blocks_and_isatap_forms_are_judged_by_shape(address: str, public: bool) -> None:
    assert is_public_address(address) is public


def test_an_isatap_id_reads_its_ipv4_address() -> None:
    assert embedded_ipv4(IPv6Address("fe80::200:5efe:127.0.0.1")) == [IPv4Address("127.0.0.1")]
    assert embedded_ipv4(IPv6Address("64:ff9b:0:1::1")) is None
