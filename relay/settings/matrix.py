"""Matrix (docs/matrix.md): the bot that tells users of their calls in a Matrix room."""

import re

from relay.settings.readers import must, parsed, rate, seconds, text, url, whole_number


def _user_id(value: str) -> str:
    if value and not re.match(r"^@[^:\s]+:\S+$", value):
        raise ValueError(value)
    return value


# The bot's homeserver, its access token (one fixed token: a login per send would be a new
# device, and Synapse de-duplicates transaction ids per device) and its user id. All three
# set: the bot runs (runrelay starts `manage.py matrix_bot`); none: Matrix is off and nothing
# is queued.
MATRIX_HOMESERVER_URL = url("MATRIX_HOMESERVER_URL", schemes=("http", "https"))
MATRIX_BOT_ACCESS_TOKEN = text("MATRIX_BOT_ACCESS_TOKEN")
MATRIX_BOT_USER_ID = parsed(
    "MATRIX_BOT_USER_ID", "", _user_id, expected="a Matrix user id like @relay:example.com"
)
_matrix_settings = {
    "MATRIX_HOMESERVER_URL": MATRIX_HOMESERVER_URL,
    "MATRIX_BOT_ACCESS_TOKEN": MATRIX_BOT_ACCESS_TOKEN,
    "MATRIX_BOT_USER_ID": MATRIX_BOT_USER_ID,
}
MATRIX_ENABLED = all(_matrix_settings.values())
_missing = ", ".join(name for name, value in _matrix_settings.items() if not value)
must(
    MATRIX_ENABLED or not any(_matrix_settings.values()),
    f"Matrix needs all three of its settings; {_missing} unset",
)
# New Matrix ids a user may set (each is a room and an invite, and says whether it exists).
RATE_LIMIT_MATRIX_ID_PER_USER = rate("RATE_LIMIT_MATRIX_ID_PER_USER", "10/h")
# How long one /sync long-poll waits (seconds), and how long a message is retried.
MATRIX_SYNC_TIMEOUT = seconds("MATRIX_SYNC_TIMEOUT", 30.0, maximum=3600)
MATRIX_RETRY_HOURS = whole_number("MATRIX_RETRY_HOURS", 24, maximum=24 * 366, unit=" (hours)")
