from accounts.models import User
from virtual_numbers.models import InventoryNumber, Number


def numbers_of(*, user: User) -> list[Number]:
    """The user's numbers, oldest first."""
    return list(Number.objects.filter(owner=user).order_by("created_at", "id"))


def inventory_counts() -> dict[str, int]:
    total = InventoryNumber.objects.count()
    held = Number.objects.count()
    return {"total": total, "held": held, "free": total - held}
