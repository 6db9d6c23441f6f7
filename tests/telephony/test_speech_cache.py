"""The speech cache's bound (issue 29): past TTS_CACHE_MAX_MB, purge_expired removes the
messages used longest ago, never one used within a call's longest life (a live call may be
playing it); each render marks its message used; /metrics shows the cache's size."""

from __future__ import annotations

import io
import os
import time
from pathlib import Path

import pytest
from django.core.management import call_command

from telephony import speech
from telephony.speech import Speech
from tests.relay.test_metrics import TOKEN, sample, scrape

LAWS = (0, 8)


def cached(cache: Path, key: str, size: int, used_ago: float) -> None:
    """A cached message of `size` bytes in each law, last used `used_ago` seconds ago."""
    at = time.time() - used_ago
    for law in LAWS:
        path = cache / f"{key}.{law}"
        path.write_bytes(b"\xff" * size)
        os.utime(path, (at, at))


def keys(cache: Path) -> set[str]:
    return {p.name.rsplit(".", 1)[0] for p in cache.iterdir() if p.is_file()}


@pytest.fixture
def cache(settings, tmp_path):
    settings.TTS_CACHE_DIR = tmp_path / "tts"
    settings.TTS_CACHE_DIR.mkdir()
    settings.TTS_CACHE_MAX_MB = 1
    settings.SIP_MAX_CALL_SECONDS = 300
    return settings.TTS_CACHE_DIR


@pytest.mark.django_db
def test_the_messages_used_longest_ago_go_first_until_the_cache_fits(cache):
    # 1.5 MB in all (each message 0.3 MB in both laws), the bound 1 MB: the two used longest
    # ago go, and the rest stays.
    for n, days in enumerate([9, 2, 7, 1, 3]):
        cached(cache, f"m{n}", 150_000, days * 86400)
    out = io.StringIO()

    call_command("purge_expired", stdout=out)

    assert keys(cache) == {"m1", "m3", "m4"}
    assert speech.cache_usage(cache) == (900_000, 3)
    assert "2 spoken message(s) of the speech cache (600 kB)" in out.getvalue()


@pytest.mark.django_db
def test_a_message_a_live_call_may_be_playing_is_kept_past_the_bound(cache):
    # Used within a call's longest life (SIP_MAX_CALL_SECONDS and a margin): kept, even with
    # the cache over its bound; one used before that goes.
    cached(cache, "playing", 700_000, 60)
    cached(cache, "ringing", 700_000, 300)
    cached(cache, "old", 100_000, 3 * 3600)

    call_command("purge_expired", stdout=io.StringIO())

    assert keys(cache) == {"playing", "ringing"}


@pytest.mark.skipif(
    not os.environ.get("CI") and bool(speech.missing_tools()),
    reason="needs espeak-ng and sox (Debian: apt-get install espeak-ng sox)",
)
def test_a_render_marks_its_message_used_and_a_trimmed_one_is_made_again(cache):
    renderer = Speech(cache)
    first = renderer.render("Your code is 4821.", "en")
    [key] = keys(cache)
    long_ago = time.time() - 30 * 86400
    for law in LAWS:
        os.utime(cache / f"{key}.{law}", (long_ago, long_ago))

    again = Speech(cache).render("Your code is 4821.", "en")  # another agent: from disk

    assert again == first
    assert all(time.time() - (cache / f"{key}.{law}").stat().st_mtime < 60 for law in LAWS)
    # Trimmed away (by a bound of nothing, nothing in use), it is synthesized again.
    assert speech.cache_trim(cache, max_bytes=0, in_use_since=time.time() + 1)[0] == 1
    assert keys(cache) == set()
    remade = Speech(cache).render("Your code is 4821.", "en")
    assert keys(cache) == {key}
    assert abs(len(remade[0]) - len(first[0])) <= 800  # the same words (espeak-ng dithers)


def test_synthesis_under_way_is_not_a_message(cache):
    (cache / "tmpabc").mkdir()
    (cache / "tmpabc" / "speech.0").write_bytes(b"\xff" * 10)
    cached(cache, "m", 10, 0)

    assert speech.cache_usage(cache) == (20, 1)


@pytest.mark.django_db
def test_metrics_show_the_caches_size(cache, settings, api_client):
    settings.METRICS_TOKEN = TOKEN
    cached(cache, "a", 1000, 10)
    cached(cache, "b", 500, 10)

    samples = scrape(api_client)

    assert sample(samples, "relay_tts_cache_bytes") == 3000
    assert sample(samples, "relay_tts_cache_messages") == 2
