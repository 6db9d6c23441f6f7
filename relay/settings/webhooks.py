"""Webhooks (docs/webhooks.md): signed call-status deliveries to the users' URLs."""

from relay.settings.readers import boolean, whole_number

# Deliveries to private, loopback or link-local addresses are refused unless this is on.
WEBHOOK_ALLOW_PRIVATE = boolean("WEBHOOK_ALLOW_PRIVATE", False)
# How long a delivery is retried; a webhook failing for this long is disabled.
WEBHOOK_RETRY_HOURS = whole_number("WEBHOOK_RETRY_HOURS", 24, maximum=24 * 366, unit=" (hours)")
