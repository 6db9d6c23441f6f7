"""The numbers the dialing policy (core/dialing.py) refuses and dials, for every path's tests."""

import pytest

EVERYWHERE = {"DIAL_ALLOWED_COUNTRIES": ["*"]}

# (number, reason, settings, words the refusal says): every number type the policy refuses,
# and numbers of other countries and of no country at all. The premium types are GB's (the
# default home), but for shared cost (GB has none) and a US premium number, refused even
# where every country is allowed.
REFUSED = [
    pytest.param("+33123456789", "country", {}, "is a number in FR", id="france"),
    pytest.param("+12015550123", "country", {}, "is a number in US", id="united-states"),
    pytest.param("+4930123456", "country", {}, "is a number in DE", id="germany"),
    pytest.param("+80012345678", "country", {}, "of no country", id="international-freephone"),
    pytest.param("+449012345678", "premium_rate", {}, "premium-rate number", id="premium-rate"),
    pytest.param("+445512345678", "uan", {}, "universal access number", id="uan"),
    pytest.param("+447012345678", "personal_number", {}, "personal number", id="personal"),
    pytest.param("+447640123456", "pager", {}, "pager number", id="pager"),
    pytest.param("+33884012345", "shared_cost", EVERYWHERE, "shared-cost number", id="shared"),
    pytest.param("+19002345678", "premium_rate", EVERYWHERE, "premium-rate", id="us-premium"),
]

ALLOWED_AT_HOME = ["+442079460120", "+447400123456", "+448001234567", "+445612345678"]
