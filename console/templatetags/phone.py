"""The browser phone's settings for the page (console/templates/console/phone.html)."""

from django import template

from core.webrtc import ice_servers_for

register = template.Library()


@register.simple_tag(takes_context=True)
def phone_config(context) -> dict:
    """STUN and TURN servers for this user's tab: TURN with credentials of their own, valid
    RTC_TURN_TTL seconds (core.webrtc.ice_servers); never the TURN secret."""
    return {"iceServers": ice_servers_for(str(context["request"].user.pk))}
