"""What the console's pages need to know of e-mail verification beyond the user's row."""

from django import template
from django.conf import settings

register = template.Library()


@register.simple_tag
def email_verification_required() -> bool:
    """REQUIRE_EMAIL_VERIFICATION: whether numbers and calls wait for a verified address."""
    return settings.REQUIRE_EMAIL_VERIFICATION
