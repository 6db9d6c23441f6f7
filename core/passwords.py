"""Password hashing: Argon2id at the parameters the environment sets.

Users' passwords and numbers' PINs go through the same hasher (Django's make_password and
check_password), so this is the kernel's, not one app's.
"""

from django.conf import settings
from django.contrib.auth.hashers import Argon2PasswordHasher


class ConfiguredArgon2PasswordHasher(Argon2PasswordHasher):
    """Django's Argon2 hasher (argon2id, version 19) with time cost, memory cost (KiB) and
    lanes from settings (PASSWORD_ARGON2_*, checked at start-up) instead of Django's
    constants.

    The algorithm name stays `argon2`: hashes are stored exactly as Django's own hasher
    stores them, so either verifies the other's, and Django's must_update re-hashes, on the
    next successful login, a stored hash whose parameters differ from these.
    """

    @property
    def time_cost(self) -> int:
        return settings.PASSWORD_ARGON2_TIME_COST

    @property
    def memory_cost(self) -> int:
        return settings.PASSWORD_ARGON2_MEMORY_KIB

    @property
    def parallelism(self) -> int:
        return settings.PASSWORD_ARGON2_PARALLELISM
