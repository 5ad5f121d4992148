"""DNS rebinding: the worker connects only to addresses it has vetted (SPEC §5.4).

DNS is simulated by replacing ``socket.getaddrinfo``, and every outgoing connection is
watched: only 127.0.0.1 is reachable, so nothing here touches the network.
"""

from __future__ import annotations

import errno
import ipaddress
import logging
import socket
import ssl
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from agents import services
from agents.models import Agent
from eventlog.webhook_models import WebhookDelivery
from eventlog.webhooks import webhook_client, webhook_deliver_due, webhook_enqueue
from hashee.errors import HasheeError
from tests.eventlog.conftest import Receiver, _handler

pytestmark = pytest.mark.django_db

PUBLIC = "93.184.216.34"
REFUSED = "refused: The webhook URL points at a private, loopback or link-local address."


@dataclass
class FakeDNS:
    """Each lookup of a name takes its next answer; the last answer then repeats. IP
    literals are answered as the real resolver does; any other name does not resolve."""

    answers: dict[str, list[list[str]]] = field(default_factory=dict)

    def answer(self, host: str, *answers: list[str]) -> None:
        self.answers[host] = list(answers)

    def getaddrinfo(self, host: str, port: int | str | None, family: int = 0, type: int = 0,
                    proto: int = 0, flags: int = 0) -> list[tuple[Any, ...]]:
        queue = self.answers.get(host)
        if queue is not None:
            addresses = queue.pop(0) if len(queue) > 1 else queue[0]
        else:
            try:
                addresses = [str(ipaddress.ip_address(host))]
            except ValueError:
                raise socket.gaierror(socket.EAI_NONAME, "Name or service not known") from None
        return [_info(address, int(port or 0)) for address in addresses]


def _info(address: str, port: int) -> tuple[Any, ...]:
    if ipaddress.ip_address(address).version == 6:
        return socket.AF_INET6, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", (address, port, 0, 0)
    return socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", (address, port)


@pytest.fixture(autouse=True)
def dns(monkeypatch: pytest.MonkeyPatch) -> FakeDNS:
    fake = FakeDNS()
    monkeypatch.setattr(socket, "getaddrinfo", fake.getaddrinfo)
    return fake


@pytest.fixture(autouse=True)
def connections(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The address of every connection attempted; only 127.0.0.1 is let through."""
    attempted: list[str] = []
    real_connect = socket.socket.connect

    def connect(sock: socket.socket, address: Any) -> None:
        attempted.append(address[0])
        if address[0] != "127.0.0.1":
            raise ConnectionRefusedError(errno.ECONNREFUSED, "no network in tests")
        real_connect(sock, address)

    monkeypatch.setattr(socket.socket, "connect", connect)
    return attempted


def port_of(receiver: Receiver) -> int:
    port = urlsplit(receiver.url).port
    assert port is not None
    return port


@pytest.fixture
def mallorys_agent(mallory: Any, dns: FakeDNS, receiver: Receiver, settings: Any) -> Agent:
    """mallory's agent, whose webhook host she resolves herself: public when it is saved."""
    settings.HASHEE_WEBHOOK_ALLOW_PRIVATE = False
    dns.answer("hooks.mallory.test", [PUBLIC])
    url = f"http://hooks.mallory.test:{port_of(receiver)}/hooks/hashee"
    return services.agent_create(owner=mallory, name="Rebinder", webhook_url=url)[0]


def enqueue(agent: Agent) -> WebhookDelivery:
    delivery = webhook_enqueue(agent=agent, event_type="agent.manifest_updated", data={"agent_id": "a-1"})
    assert delivery is not None
    return delivery


def test_a_host_rebound_to_loopback_after_its_check_is_not_contacted(
        mallorys_agent: Agent, receiver: Receiver, dns: FakeDNS, connections: list[str], caplog: Any) -> None:
    delivery = enqueue(mallorys_agent)
    # Public for the delivery's check, then the local receiver by the time we connect.
    dns.answer("hooks.mallory.test", [PUBLIC], ["127.0.0.1"])

    with caplog.at_level(logging.INFO, logger="eventlog.webhooks"):
        assert webhook_deliver_due() == 1

    assert receiver.requests == [] and connections == []
    delivery.refresh_from_db()
    [attempt] = delivery.attempts.all()
    assert (attempt.status_code, attempt.error, delivery.last_error) == (None, REFUSED, REFUSED)
    assert delivery.status == "pending" and delivery.attempt_count == 1, "retried, like any refusal"
    assert f"webhook delivery {delivery.pk} agent {mallorys_agent.pk} attempt 1" in caplog.text
    assert "(refused)" in caplog.text
    assert "hooks.mallory.test" not in caplog.text and mallorys_agent.webhook_secret not in caplog.text


@pytest.mark.parametrize("answer", [
    ["127.0.0.1"], ["10.0.0.7"], ["192.168.1.20"], ["169.254.169.254"], ["100.64.0.1"], ["::1"], ["fe80::1"],
    ["fd00::7"], [PUBLIC, "10.0.0.7"],
    # IPv6 forms a translator or tunnel delivers to an embedded private IPv4 address
    ["64:ff9b::7f00:1"], ["64:ff9b:1::a00:7"], ["2002:a9fe:a9fe::1"], ["::10.0.0.7"], ["::ffff:0:7f00:1"],
    ["2001:0:4136:e378:8000:63bf:80ff:fffe"],
], ids=str)
def test_a_host_rebound_to_any_refused_address_is_never_connected_to(
        mallorys_agent: Agent, dns: FakeDNS, connections: list[str], answer: list[str]) -> None:
    delivery = enqueue(mallorys_agent)
    dns.answer("hooks.mallory.test", [PUBLIC], answer)

    assert webhook_deliver_due() == 1

    assert connections == []
    assert delivery.attempts.get().error == REFUSED


def test_the_worker_client_itself_refuses_a_host_that_resolves_to_loopback(
        receiver: Receiver, dns: FakeDNS, connections: list[str], settings: Any) -> None:
    settings.HASHEE_WEBHOOK_ALLOW_PRIVATE = False
    dns.answer("hooks.mallory.test", ["127.0.0.1"])

    with webhook_client() as client, pytest.raises(HasheeError) as refused:
        client.post(f"http://hooks.mallory.test:{port_of(receiver)}/hooks/hashee", content=b"{}")

    assert refused.value.message == REFUSED.removeprefix("refused: ")
    assert receiver.requests == [] and connections == []


def test_a_delivery_by_host_name_reaches_the_vetted_address_with_its_host_header(
        observed_agent: Agent, receiver: Receiver, dns: FakeDNS, connections: list[str]) -> None:
    dns.answer("hooks.example.test", ["127.0.0.1"])
    url = f"http://hooks.example.test:{port_of(receiver)}/hooks/hashee"
    services.agent_update(agent_id=observed_agent.pk, actor=observed_agent.owner, webhook_url=url)
    delivery = enqueue(observed_agent)

    assert webhook_deliver_due() == 1

    delivery.refresh_from_db()
    assert delivery.status == "delivered" and delivery.attempts.get().url == url
    [request] = receiver.requests
    assert request.headers["host"] == f"hooks.example.test:{port_of(receiver)}"
    assert connections == ["127.0.0.1"]


def test_a_host_with_several_addresses_is_reached_on_the_first_that_answers(
        observed_agent: Agent, receiver: Receiver, dns: FakeDNS, connections: list[str]) -> None:
    dns.answer("hooks.example.test", ["10.0.0.9", "127.0.0.1"])  # 10.0.0.9 refuses connections here
    url = f"http://hooks.example.test:{port_of(receiver)}/hooks/hashee"
    Agent.objects.filter(pk=observed_agent.pk).update(webhook_url=url)
    delivery = enqueue(observed_agent)

    assert webhook_deliver_due() == 1

    assert delivery.attempts.get().status_code == 200 and len(receiver.requests) == 1
    assert connections == ["10.0.0.9", "127.0.0.1"]


# --- https: SNI and the certificate are checked against the URL's host name ----------


@dataclass
class TLSReceiver:
    receiver: Receiver
    port: int
    server_names: list[str | None]


def _self_signed(host: str, directory: Path) -> tuple[Path, Path]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(x509.oid.NameOID.COMMON_NAME, host)])
    now = datetime.now(UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - timedelta(minutes=5)).not_valid_after(now + timedelta(hours=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(host)]), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(key.public_key()), critical=False)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, content_commitment=False,
                                         key_encipherment=False, data_encipherment=False, key_agreement=False,
                                         crl_sign=False, encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path


@pytest.fixture
def tls_receiver(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[TLSReceiver]:
    """An https receiver on 127.0.0.1 whose certificate names hooks.example.test only,
    trusted by the worker as if a public CA had issued it."""
    cert_path, key_path = _self_signed("hooks.example.test", tmp_path)
    monkeypatch.setattr("certifi.where", lambda: str(cert_path))
    server_names: list[str | None] = []

    def record_server_name(_sock: Any, server_name: str | None, _context: Any) -> None:
        server_names.append(server_name)

    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert_path, key_path)
    context.sni_callback = record_server_name
    holder: list[Receiver] = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(holder))
    server.socket = context.wrap_socket(server.socket, server_side=True)
    port = server.server_address[1]
    holder.append(Receiver(url=f"https://hooks.example.test:{port}/hooks/hashee"))
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield TLSReceiver(receiver=holder[0], port=port, server_names=server_names)
    server.shutdown()
    server.server_close()
    thread.join(5)


@pytest.mark.parametrize(("host", "delivered"), [("hooks.example.test", True), ("other.example.test", False)])
def test_https_is_verified_against_the_url_host_not_the_address_connected_to(
        observed_agent: Agent, tls_receiver: TLSReceiver, dns: FakeDNS, connections: list[str],
        host: str, delivered: bool) -> None:
    dns.answer(host, ["127.0.0.1"])
    Agent.objects.filter(pk=observed_agent.pk).update(webhook_url=f"https://{host}:{tls_receiver.port}/hooks/hashee")
    delivery = enqueue(observed_agent)

    assert webhook_deliver_due() == 1

    attempt = delivery.attempts.get()
    assert connections == ["127.0.0.1"] and tls_receiver.server_names == [host]
    if delivered:
        assert attempt.status_code == 200
        assert tls_receiver.receiver.requests[0].headers["host"] == f"{host}:{tls_receiver.port}"
    else:
        assert attempt.status_code is None and attempt.error.startswith("ConnectError: ")
        assert "certificate verify failed" in attempt.error and tls_receiver.receiver.requests == []
