"""Whether an IP address is one a webhook may be sent to (SPEC §5.4): a public address,
where an IPv6 address that stands for an IPv4 address is judged by that IPv4 address.

``ipaddress``'s ``is_global`` alone is not enough: a translator or tunnel delivers a
packet sent to ``64:ff9b::7f00:1`` (NAT64) or ``2002:a00:1::`` (6to4) to 127.0.0.1 or
10.0.0.1, while Python judges the IPv6 address, which it calls global; and Python calls
some special-purpose blocks global (``192.0.0.8``, ``192.88.99.1``, ``fec0::1``). So the
rules go by shape, not by a list of known bad addresses:

* an IPv4 address must be global, not multicast, and outside every block of IANA's IPv4
  special-purpose registry (even those marked globally reachable: none is a web server);
* an IPv6 form that embeds IPv4 addresses (mapped, compatible, SIIT, NAT64, 6to4, Teredo)
  is judged by them alone; an ISATAP interface id (``[02]00:5efe:a.b.c.d``, any prefix)
  must embed a public IPv4 address *and* sit in a public prefix;
* any other IPv6 address must be global unicast (``2000::/3``), global for Python, not in
  IANA's IPv6 special-purpose registry.
"""

from __future__ import annotations

from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network, ip_address

NAT64_WELL_KNOWN = IPv6Network("64:ff9b::/96")  # RFC 6052: always the /96 format
NAT64_LOCAL_USE = IPv6Network("64:ff9b:1::/48")  # RFC 8215: the operator picks /48 … /96
IPV4_COMPATIBLE = IPv6Network("::/96")  # deprecated ::a.b.c.d (also :: and ::1)
IPV4_MAPPED = IPv6Network("::ffff:0:0/96")
IPV4_TRANSLATED = IPv6Network("::ffff:0:0:0/96")  # SIIT, RFC 2765
SIX_TO_FOUR = IPv6Network("2002::/16")
TEREDO = IPv6Network("2001::/32")

_TRANSLATED = (IPV4_MAPPED, IPV4_TRANSLATED, IPV4_COMPATIBLE, NAT64_WELL_KNOWN, NAT64_LOCAL_USE, SIX_TO_FOUR, TEREDO)
GLOBAL_UNICAST = IPv6Network("2000::/3")
# RFC 5214 §6.1: an ISATAP interface id is 0000:5efe:a.b.c.d, or 0200:5efe:… (the u/l bit; the
# group bit is ignored too, so 0100/0300 count).
_ISATAP_IID_MASK, _ISATAP_IID = 0xFCFFFFFF_00000000, 0x00005EFE_00000000

# IANA IPv4 Special-Purpose Address Registry (every block, whatever its "globally
# reachable" column says), plus multicast and limited broadcast.
SPECIAL_IPV4 = tuple(IPv4Network(block) for block in (
    "0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12",
    "192.0.0.0/24", "192.0.2.0/24", "192.31.196.0/24", "192.52.193.0/24", "192.88.99.0/24", "192.168.0.0/16",
    "192.175.48.0/24", "198.18.0.0/15", "198.51.100.0/24", "203.0.113.0/24", "224.0.0.0/4", "240.0.0.0/4",
))
# IANA IPv6 Special-Purpose Address Registry, plus deprecated site-local and multicast (the
# forms that embed IPv4 are judged by it before this list is read).
SPECIAL_IPV6 = tuple(IPv6Network(block) for block in (
    "::/128", "::1/128", "100::/64", "100:0:0:1::/64", "2001::/23", "2001:db8::/32", "2620:4f:8000::/48",
    "3fff::/20", "5f00::/16", "fc00::/7", "fe80::/10", "fec0::/10", "ff00::/8",
))

_LAST_32 = 0xFFFFFFFF


def is_public_address(address: str) -> bool:
    """True for a global unicast address outside every special-purpose block; an IPv6
    address that embeds IPv4 addresses is public only if every one of them is. Raises
    ValueError for a malformed address."""
    ip = ip_address(address)
    if isinstance(ip, IPv4Address):
        return _is_public_ipv4(ip)
    embedded = embedded_ipv4(ip)
    if embedded is not None and not all(_is_public_ipv4(v4) for v4 in embedded):
        return False
    if any(ip in network for network in _TRANSLATED):
        return True  # the packet goes to the IPv4 addresses just judged
    return ip.is_global and ip in GLOBAL_UNICAST and not _in_any(ip, SPECIAL_IPV6)


def _is_public_ipv4(ip: IPv4Address) -> bool:
    return ip.is_global and not _in_any(ip, SPECIAL_IPV4)


def _in_any(ip: IPv4Address | IPv6Address, networks: tuple[IPv4Network, ...] | tuple[IPv6Network, ...]) -> bool:
    return any(ip in network for network in networks)


def embedded_ipv4(ip: IPv6Address) -> list[IPv4Address] | None:
    """The IPv4 addresses a packet to ``ip`` may reach, for the IPv6 forms that embed
    them (an ISATAP interface id adds its own); None for any other address."""
    value = int(ip)
    readings = _translated_readings(ip, value)
    if value & _ISATAP_IID_MASK == _ISATAP_IID:
        readings = [*(readings or []), IPv4Address(value & _LAST_32)]
    return readings


def _translated_readings(ip: IPv6Address, value: int) -> list[IPv4Address] | None:
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
