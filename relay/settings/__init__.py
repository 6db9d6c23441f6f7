"""Relay settings, read from environment variables, one section per concern.

Each section reads its variables with the typed readers of relay/settings/readers.py, which
stop start-up with one line naming a variable whose value is wrong. Every variable they read
is in README.md's table, and every variable there is read (tests/relay/test_settings_table.py).

The embedded default needs no variable at all except SECRET_KEY, which `make run` provisions
under var/ on first start; DEBUG never supplies a secret outside development.

The sections, in order: base (core), database (and Redis), http (HTTP and sockets),
security, calls, telephony, voicemail, policy (dialing, plans, sign-up), webhooks, voiceapps, mail,
matrix and metrics (and logs). A section may use what an earlier one set, imported by name, never a
later one's. Apps read settings through django.conf.settings only.
"""

# In the order of the sections, each after those it reads from.
# isort: off
from relay.settings.base import *  # noqa: F403
from relay.settings.database import *  # noqa: F403
from relay.settings.http import *  # noqa: F403
from relay.settings.security import *  # noqa: F403
from relay.settings.calls import *  # noqa: F403
from relay.settings.telephony import *  # noqa: F403
from relay.settings.voicemail import *  # noqa: F403
from relay.settings.policy import *  # noqa: F403
from relay.settings.webhooks import *  # noqa: F403
from relay.settings.voiceapps import *  # noqa: F403
from relay.settings.mail import *  # noqa: F403
from relay.settings.matrix import *  # noqa: F403
from relay.settings.metrics import *  # noqa: F403
# isort: on
