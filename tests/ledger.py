"""The ledger's ids in the frames tests expect: a call's `call` is its row's pk (calls.Call),
read here so that a test compares it rather than taking it from the frame it checks."""

from asgiref.sync import sync_to_async

from calls.models import Call


def call_pk(call_id: str, owner=None) -> str:
    """Relay's own id (`call`) of the call the client named `call_id`."""
    calls = Call.objects.filter(call_id=call_id)
    if owner is not None:
        calls = calls.filter(owner=owner)
    return str(calls.get().pk)


def ack(call_id: str, status: str, owner=None) -> dict:
    """The `call_ack` frame (and POST /api/calls body) of the stored call `call_id`."""
    return {
        "type": "call_ack",
        "callId": call_id,
        "call": call_pk(call_id, owner),
        "status": status,
    }


aack = sync_to_async(ack)
