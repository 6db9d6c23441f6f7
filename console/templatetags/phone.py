"""The browser phone's settings for the page (console/templates/console/phone.html)."""

import time

from django import template
from django.conf import settings

from core.webrtc import ice_servers

register = template.Library()


@register.simple_tag(takes_context=True)
def phone_config(context) -> dict:
    """STUN and TURN servers for this user's tab: TURN with credentials of their own, valid
    RTC_TURN_TTL seconds (core.webrtc.ice_servers); never the TURN secret."""
    user = context["request"].user
    return {
        "iceServers": ice_servers(
            urls=settings.RTC_ICE_SERVERS,
            secret=settings.RTC_TURN_SECRET,
            ttl=settings.RTC_TURN_TTL,
            name=str(user.pk),
            now=time.time(),
        )
    }
