import pytest


@pytest.mark.django_db
def test_healthz_reports_every_part_ok(client):
    response = client.get("/healthz")

    assert response.status_code == 200
    assert response.json() == {"status": "ok", "database": "ok", "channelLayer": "ok"}


@pytest.mark.django_db
def test_healthz_names_an_unreachable_channel_layer(client, settings):
    # A real Redis client against a port where nothing listens: a genuine connection failure.
    settings.CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": ["redis://127.0.0.1:1/0"]},
        }
    }
    from channels.layers import channel_layers

    channel_layers.backends.clear()
    try:
        response = client.get("/healthz")
    finally:
        channel_layers.backends.clear()

    assert response.status_code == 503
    assert response.json() == {
        "status": "unavailable",
        "database": "ok",
        "channelLayer": "unavailable",
    }
