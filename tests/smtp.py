"""A real SMTP server for the tests that send mail: aiosmtpd on loopback, in a thread of its
own, speaking STARTTLS (or TLS from the first byte) on a certificate of the test's own CA and
asking for a login, as a mail provider's submission port does. It keeps what it received, and
can be told to answer the next messages with an error.

`mailbox` points EMAIL_URL's settings at it for one test; `mailbox.delivered()` runs the
worker's due tasks (so the outbox's mail goes out) and answers the messages received.
"""

from __future__ import annotations

import email
import email.policy
import logging
import re
import threading
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from email.message import EmailMessage

import pytest
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword

from harness.certs import TestCA
from harness.ports import free_port

USER, PASSWORD = "relay-mailer", "smtp-test-password"
LINK = re.compile(r"https?://[^\s<>\"']+")


@dataclass
class Received:
    """One message as the server got it: the envelope and the parsed message."""

    mail_from: str
    rcpt_tos: list[str]
    message: EmailMessage

    def part(self, content_type: str) -> str:
        found = self.message.get_body(preferencelist=(content_type.split("/")[1],))
        assert found is not None and found.get_content_type() == content_type, content_type
        return found.get_content()

    @property
    def text(self) -> str:
        return self.part("text/plain")

    @property
    def html(self) -> str:
        return self.part("text/html")

    def links(self) -> list[str]:
        """The links of the plain-text part, in order."""
        return LINK.findall(self.text)


@dataclass
class Handler:
    received: list[Received] = field(default_factory=list)
    # SMTP answers for the next messages' DATA, in turn (e.g. "451 4.3.0 Try again later").
    answers: deque = field(default_factory=deque)
    lock: threading.Lock = field(default_factory=threading.Lock)

    async def handle_DATA(self, server, session, envelope):  # noqa: N802 - aiosmtpd's name
        with self.lock:
            if self.answers:
                return self.answers.popleft()
            message = email.message_from_bytes(envelope.content, policy=email.policy.default)
            self.received.append(Received(envelope.mail_from, list(envelope.rcpt_tos), message))
        return "250 2.0.0 Queued"


def _authenticator(server, session, envelope, mechanism, auth_data):
    ok = isinstance(auth_data, LoginPassword) and (
        auth_data.login == USER.encode() and auth_data.password == PASSWORD.encode()
    )
    return AuthResult(success=ok, handled=False)  # handled=False: aiosmtpd answers 535


class SmtpServer:
    """aiosmtpd on 127.0.0.1: STARTTLS required before the login (`implicit_tls=False`), or
    TLS from the first byte."""

    def __init__(self, ca: TestCA, *, implicit_tls: bool) -> None:
        import ssl

        issued = ca.issue("smtp-implicit" if implicit_tls else "smtp", "127.0.0.1", "localhost")
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(issued.cert, issued.key)
        self.ca_file = str(ca.cert)
        self.implicit_tls = implicit_tls
        self.handler = Handler()
        self.port = free_port()
        tls = {"ssl_context": context} if implicit_tls else {"tls_context": context}
        self.controller = Controller(
            self.handler,
            hostname="127.0.0.1",
            port=self.port,
            require_starttls=not implicit_tls,
            auth_required=True,
            # aiosmtpd counts only STARTTLS as TLS; from the first byte, every command is.
            auth_require_tls=not implicit_tls,
            authenticator=_authenticator,
            **tls,
        )

    def start(self) -> None:
        # aiosmtpd logs every command at INFO on "mail.log", under Relay's own "mail".
        logging.getLogger("mail.log").setLevel(logging.WARNING)
        self.controller.start()

    def stop(self) -> None:
        self.controller.stop()

    @property
    def url(self) -> str:
        scheme = "smtps" if self.implicit_tls else "smtp"
        return f"{scheme}://{USER}:{PASSWORD}@127.0.0.1:{self.port}"


class Mailbox:
    """What one test's mail reached: the server's messages since the test began."""

    def __init__(self, server: SmtpServer) -> None:
        self.server = server

    @property
    def messages(self) -> list[Received]:
        with self.server.handler.lock:
            return list(self.server.handler.received)

    def answer_next(self, *answers: str) -> None:
        """The server answers the next messages' DATA with these, in turn."""
        self.server.handler.answers.extend(answers)

    def delivered(self) -> list[Received]:
        """Run every due task (the outbox's mail goes out) and answer what arrived."""
        from tests.conftest import drain_tasks

        drain_tasks()
        return self.messages

    def only(self, to: str) -> Received:
        """The one message delivered to `to` (after running the due tasks)."""
        found = [m for m in self.delivered() if to in m.rcpt_tos]
        assert len(found) == 1, [(m.rcpt_tos, m.message["Subject"]) for m in self.messages]
        return found[0]


def transport_settings(settings, server: SmtpServer) -> None:
    """Point EMAIL_URL's settings at `server`, trusting the test CA (EMAIL_CA_FILE)."""
    from relay.settings.mail import email_transport

    for name, value in email_transport(server.url).items():
        setattr(settings, name, value)
    settings.EMAIL_CA_FILE = server.ca_file
    settings.EMAIL_TIMEOUT = 10.0


@pytest.fixture(scope="session")
def smtp_ca(tmp_path_factory) -> TestCA:
    return TestCA(tmp_path_factory.mktemp("smtp-ca"))


@pytest.fixture(scope="session")
def smtp_server(smtp_ca) -> Iterator[SmtpServer]:
    server = SmtpServer(smtp_ca, implicit_tls=False)
    server.start()
    yield server
    server.stop()


@pytest.fixture
def mailbox(settings, smtp_server) -> Iterator[Mailbox]:
    """The test's mail goes to the suite's SMTP server (STARTTLS, login), and `mailbox`
    reads what arrived there during the test."""
    transport_settings(settings, smtp_server)
    with smtp_server.handler.lock:
        smtp_server.handler.received.clear()
        smtp_server.handler.answers.clear()
    yield Mailbox(smtp_server)
