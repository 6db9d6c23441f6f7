"""Outbound calls: who places them, the simulated provider's pace, the limit per user, and the
worker that drives them (its task queue, its recovery of calls whose worker died)."""

from relay.settings.readers import choice, number, rate, seconds, text, whole_number

RATE_LIMIT_CALLS_PER_USER = rate("RATE_LIMIT_CALLS_PER_USER", "60/m")
TELEPHONY_PROVIDER = choice("TELEPHONY_PROVIDER", "simulated", ("simulated", "sip"))
SERVICE_CALLER_ID = text("SERVICE_CALLER_ID", "+441632960000")
SIMULATED_STEP_SECONDS = seconds("SIMULATED_STEP_SECONDS", 1.0, maximum=3600)
SIMULATED_TALK_SCALE = number("SIMULATED_TALK_SCALE", 0.1, maximum=100)
# A call whose next step is this late (and has no task waiting) lost its worker.
CALL_RECOVERY_GRACE = whole_number(
    "CALL_RECOVERY_GRACE", 30, maximum=24 * 60 * 60, unit=" (seconds)"
)
CALL_RECOVERY_INTERVAL = seconds("CALL_RECOVERY_INTERVAL", 10.0, above=True, maximum=3600)
CALL_MAX_RECOVERIES = whole_number("CALL_MAX_RECOVERIES", 3, minimum=0, maximum=1000)
WORKER_POLL_INTERVAL = seconds("WORKER_POLL_INTERVAL", 0.2, above=True, maximum=60)

TASKS = {
    "default": {
        "BACKEND": "django_tasks_db.DatabaseBackend",
        # `transcribe`: voicemail transcripts, served by relay_worker's threads of their own
        # (history.tasks), so that a long one never holds up a call's dispatch.
        "QUEUES": ["default", "transcribe"],
    }
}
# What every worker runs every CALL_RECOVERY_INTERVAL besides its tasks: each pass finds work
# whose task was lost (a dead worker's calls, undelivered webhooks and mail) and queues it again.
WORKER_PERIODIC_PASSES = [
    "realtime.tasks.calls_recover",
    "webhooks.services.deliveries_sweep",
    "matrix.services.messages_sweep",
    "mail.services.mails_sweep",
    "history.tasks.transcriptions_sweep",
]
# Who announces a recording's transcript once the worker has stored it (history.tasks), by
# the recording's kind: named here, as the passes above are, because a `record` verb's call
# is realtime's to push and realtime imports history, never the other way round.
TRANSCRIPT_ANNOUNCED = {
    "voicemail": "history.tasks.voicemail_transcribed",
    "record": "realtime.pipeline.recording_transcribed",
    "call": "history.recordings.call_recording_announce",
}
