from tests.factories import CallRecordFactory


def test_history_admin_filters_searches_and_is_read_only(staff_client):
    record = CallRecordFactory(caller_num="+447700900555", status="missed")
    CallRecordFactory(caller_num="+447700900444", status="answered")

    history = "/admin/calls/call/"
    by_status = staff_client.get(history, {"direction": "inbound", "outcome__exact": "missed"})
    by_caller = staff_client.get(history, {"direction": "inbound", "q": "+447700900555"})
    by_owner = staff_client.get(history, {"q": record.number.owner.email})
    detail = staff_client.get(f"/admin/calls/call/{record.pk}/change/")

    assert b"+447700900555" in by_status.content and b"+447700900444" not in by_status.content
    assert b"+447700900555" in by_caller.content and b"+447700900444" not in by_caller.content
    assert b"+447700900555" in by_owner.content
    assert detail.status_code == 200
    assert b'name="_save"' not in detail.content  # no save button: read-only


def test_history_changelist_queries_are_bounded(staff_client, django_assert_max_num_queries):
    for _ in range(30):
        CallRecordFactory()

    with django_assert_max_num_queries(12):
        response = staff_client.get("/admin/calls/call/", {"direction": "inbound"})

    assert response.status_code == 200
