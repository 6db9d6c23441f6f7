"""The Matrix bot's reads of a user's room."""

from accounts.models import User
from matrix.models import MatrixRoom, RoomStatus


def matrix_room_in_use(*, user: User) -> MatrixRoom | None:
    """The user's room not yet ended (at most one), whatever its status; None when none."""
    return MatrixRoom.objects.filter(user=user, ended_at__isnull=True).first()


def room_joined(*, user_id) -> MatrixRoom | None:
    """The user's room in use when they have joined it (the bot may send there), else None."""
    return MatrixRoom.objects.filter(
        user_id=user_id, ended_at__isnull=True, status=RoomStatus.JOINED
    ).first()
