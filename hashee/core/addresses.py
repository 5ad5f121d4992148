"""Whether an IP address is one a webhook may be sent to (SPEC §5.4): a public address,
where an IPv6 address that stands for an IPv4 address is judged by that IPv4 address.

``ipaddress``'s ``is_global`` alone is not enough: a translator or tunnel delivers a
packet sent to ``64:ff9b::7f00:1`` (NAT64) or ``2002:a00:1::`` (6to4) to 127.0.0.1 or
10.0.0.1, while Python judges the IPv6 address, which it calls global.
"""

from __future__ import annotations

from ipaddress import IPv4Address, IPv6Address, IPv6Network, ip_address

NAT64_WELL_KNOWN = IPv6Network("64:ff9b::/96")  # RFC 6052: always the /96 format
NAT64_LOCAL_USE = IPv6Network("64:ff9b:1::/48")  # RFC 8215: the operator picks /48 … /96
IPV4_COMPATIBLE = IPv6Network("::/96")  # deprecated ::a.b.c.d (also :: and ::1)
IPV4_MAPPED = IPv6Network("::ffff:0:0/96")
IPV4_TRANSLATED = IPv6Network("::ffff:0:0:0/96")  # SIIT, RFC 2765
SIX_TO_FOUR = IPv6Network("2002::/16")
TEREDO = IPv6Network("2001::/32")

_LAST_32 = 0xFFFFFFFF


def is_public_address(address: str) -> bool:
    """True for a global unicast address; an IPv6 address that embeds IPv4 addresses is
    public only if every one of them is. Raises ValueError for a malformed address."""
    ip = ip_address(address)
    if isinstance(ip, IPv6Address):
        embedded = embedded_ipv4(ip)
        if embedded is not None:
            return all(_is_public(v4) for v4 in embedded)
    return _is_public(ip)


def _is_public(ip: IPv4Address | IPv6Address) -> bool:
    return ip.is_global and not ip.is_multicast


def embedded_ipv4(ip: IPv6Address) -> list[IPv4Address] | None:
    """The IPv4 addresses a packet to ``ip`` may reach, for the IPv6 forms that embed
    them; None for any other address."""
    value = int(ip)
    if ip in IPV4_MAPPED or ip in IPV4_TRANSLATED or ip in IPV4_COMPATIBLE or ip in NAT64_WELL_KNOWN:
        return [IPv4Address(value & _LAST_32)]
    if ip in NAT64_LOCAL_USE:
        return _rfc6052_readings(value)
    if ip in SIX_TO_FOUR:
        return [IPv4Address((value >> 80) & _LAST_32)]
    if ip in TEREDO:  # the server is bits 32-63; the client's address is stored inverted
        return [IPv4Address((value >> 64) & _LAST_32), IPv4Address(~value & _LAST_32)]
    return None


def _rfc6052_readings(value: int) -> list[IPv4Address]:
    """Every IPv4 address the local-use prefix may carry: where it sits depends on the
    prefix length the operator chose (RFC 6052 §2.2), which we cannot know. A reading
    counts when its suffix (and the reserved bits 64-71) are zero, as RFC 6052 requires;
    the /96 reading always counts."""
    readings = [IPv4Address(value & _LAST_32)]
    if (value >> 56) & 0xFF:  # bits 64-71 must be zero in the /48, /56 and /64 formats
        return readings
    formats = (  # (suffix bits that must be zero, the IPv4 address from the other bits)
        (24, ((value >> 24) & _LAST_32)),                                  # /64: bits 72-103
        (32, ((value >> 64) & 0xFF) << 24 | ((value >> 32) & 0xFFFFFF)),   # /56: 56-63, 72-95
        (40, ((value >> 64) & 0xFFFF) << 16 | ((value >> 40) & 0xFFFF)),   # /48: 48-63, 72-87
    )
    readings += [IPv4Address(v4) for suffix, v4 in formats if value & ((1 << suffix) - 1) == 0]
    return readings
