"""The SMTP transport of EMAIL_URL: Django's, trusting EMAIL_CA_FILE when it is set."""

import ssl

from django.conf import settings
from django.core.mail.backends.smtp import EmailBackend
from django.utils.functional import cached_property


class SmtpBackend(EmailBackend):
    """Django's SMTP backend (STARTTLS or TLS from the first byte, as EMAIL_URL says). With
    EMAIL_CA_FILE it trusts that bundle instead of the system's: a self-hosted relay under a
    private CA, or the tests' own. The server's name is checked either way."""

    @cached_property
    def ssl_context(self) -> ssl.SSLContext:
        if not settings.EMAIL_CA_FILE:
            return super().ssl_context
        context = ssl.create_default_context(cafile=settings.EMAIL_CA_FILE)
        if self.ssl_certfile or self.ssl_keyfile:
            context.load_cert_chain(self.ssl_certfile, self.ssl_keyfile)
        return context
