from django_tasks import task

from realtime import services


@task()
def advance_call(call_request_id: str, expected_status: str) -> None:
    """Take one step of an outbound call (see realtime.services.call_advance)."""
    services.call_advance(call_request_id=call_request_id, expected_status=expected_status)
