"""What the bot says: each message as plain text (`body`) and HTML (`formatted_body`).

Everything that came from a user (an alias, a message, a caller's number) is escaped in the
HTML, so nothing they typed can become markup in someone's client.
"""

from __future__ import annotations

from dataclasses import dataclass
from html import escape

HELP = (
    "Commands:\n"
    "!call <number> <message>: ring the number (E.164, like +442079460123) and say the message\n"
    "!call --machine-detection=leave_message <number> <message>: on an answering machine, say "
    "it after the beep (or =detect: only tell who answered)\n"
    "!calls: your last 5 calls\n"
    "!help: this text"
)

OUTBOUND_WORDS = {
    "completed": "completed",
    "busy": "was busy",
    "no_answer": "was not answered",
    "failed": "failed",
    "canceled": "was canceled",
}


@dataclass(frozen=True)
class Text:
    body: str
    html: str

    def content(self, *, thread_root: str = "", about: dict | None = None) -> dict:
        """The notice's event content: in the thread of `thread_root` if given, and naming the
        call it is about (`about`: {"call", "seq"}, as frames and webhooks name it) under
        Relay's own key, `org.relay.call`, which clients that do not know it ignore."""
        content = {
            "msgtype": "m.notice",
            "body": self.body,
            "format": "org.matrix.custom.html",
            "formatted_body": self.html,
        }
        if about:
            content["org.relay.call"] = about
        if thread_root:
            content["m.relates_to"] = {
                "rel_type": "m.thread",
                "event_id": thread_root,
                "is_falling_back": True,
                "m.in_reply_to": {"event_id": thread_root},
            }
        return content


def _seconds(duration) -> str:
    return f"{duration} s" if duration is not None else ""


def inbound_call(event: dict) -> Text:
    """A `call_record` frame: who called which of the user's numbers, and what became of it."""
    number = event["number"]
    alias = event.get("alias") or ""
    caller = event.get("caller_num") or "an unknown caller"
    status = event["status"]
    to = f"{number} ({alias})" if alias else number
    to_html = f"{escape(number)} (<i>{escape(alias)}</i>)" if alias else escape(number)
    if status == "answered" and event.get("answered_by") == "forward":
        # Which entry of the ring list took it: a phone or SIP URI, or a person (a member
        # entry: their tab, or their ring phone).
        member = event.get("answered_member_email")
        where = event.get("forwarded_to")
        if member:
            where = f"{member}'s " + ("browser" if where == "browser" else f"phone {where}")
        what = f"answered on {where}, {_seconds(event.get('duration'))}"
    elif status == "answered" and event.get("answered_by") == "voicemail":
        what = f"voicemail, {_seconds(event.get('duration'))}"
        if event.get("recording_seconds"):
            what += f"; a {event['recording_seconds']} s message was left"
    elif status == "answered" and event.get("answered_by") == "app":
        what = f"answered by its voice app, {_seconds(event.get('duration'))}"
    elif status == "answered":
        what = f"answered, {_seconds(event.get('duration'))}"
    elif status == "missed":
        what = "missed"
    else:
        what = "blocked"
    return Text(
        body=f"Call from {caller} to {to}: {what}.",
        html=f"Call from <b>{escape(caller)}</b> to {to_html}: {escape(what)}.",
    )


def transcript(event: dict) -> Text:
    """A `call_record.transcribed` frame: the voicemail's words, marked as a machine's draft."""
    caller = event.get("caller_num") or "an unknown caller"
    number, alias = event["number"], event.get("alias") or ""
    to = f"{alias} ({number})" if alias else number
    confidence = event.get("transcript_confidence")
    sure = f", confidence {round(confidence * 100)}%" if confidence is not None else ""
    words = event["transcript"]
    label = f"automatic transcript, may be inaccurate{sure}"
    return Text(
        body=f"Voicemail from {caller} to {to} ({label}): \u201c{words}\u201d",
        html=f"Voicemail from <b>{escape(caller)}</b> to {escape(to)} (<i>{escape(label)}</i>): "
        f"<blockquote>{escape(words)}</blockquote>",
    )


def call_recording(event: dict) -> Text:
    """A `recording.completed` frame: a bridged call to the user's number was recorded, and
    what its transcript says (each line its speaker's), marked as a machine's draft."""
    caller = event.get("caller_num") or "an unknown caller"
    seconds = event.get("seconds") or 0
    cut = " (cut short)" if event.get("incomplete") else ""
    what = f"Call from {caller} to {event['number']} recorded, {seconds} s{cut}"
    words = event.get("transcript") or ""
    if not words:
        return Text(body=f"{what}.", html=f"{escape(what)}.")
    label = "automatic transcript, may be inaccurate"
    return Text(
        body=f"{what} ({label}):\n{words}",
        html=f"{escape(what)} (<i>{label}</i>): <blockquote>{escape(words)}</blockquote>",
    )


# Who answered, as machine detection told it (the call's `answeredBy`).
ANSWERED_BY_WORDS = {
    "human": "a person",
    "machine": "an answering machine",
    "fax": "a fax",
    "unknown": "no telling who",
}


def outbound_call(
    *, to: str, status: str, duration=None, reason: str = "", answered_by: str = ""
) -> Text:
    """An outbound call that ended: its target, its final status, who answered it (when
    machine detection was asked for), its duration or reason."""
    words = OUTBOUND_WORDS.get(status, status)
    if answered_by in ANSWERED_BY_WORDS:
        words = f"{words}, answered by {ANSWERED_BY_WORDS[answered_by]}"
    detail = ""
    if status == "completed" and duration is not None:
        detail = f", {_seconds(duration)}"
    elif reason:
        detail = f" ({reason})"
    return Text(
        body=f"Your call to {to} {words}{detail}.",
        html=f"Your call to <b>{escape(to)}</b> {escape(words)}{escape(detail)}.",
    )


def call_queued(*, to: str, call_id: str) -> Text:
    return Text(
        body=f"Calling {to}: queued (call id {call_id}).",
        html=f"Calling <b>{escape(to)}</b>: queued (call id <code>{escape(call_id)}</code>).",
    )


def refused(message: str) -> Text:
    return Text(body=f"Not placed: {message}", html=f"Not placed: {escape(message)}")


def help_text() -> Text:
    lines = HELP.split("\n")
    return Text(body=HELP, html="<br>".join(escape(line) for line in lines))


def recent_calls(calls: list) -> Text:
    """`!calls`: the user's last calls, newest first."""
    if not calls:
        return Text(body="You have no calls yet.", html="You have no calls yet.")
    rows = []
    for call in calls:
        extra = f", {call.duration} s" if call.duration is not None else ""
        rows.append(f"{call.to}: {call.status}{extra}")
    return Text(
        body="Your last calls:\n" + "\n".join(rows),
        html="Your last calls:<ul>" + "".join(f"<li>{escape(r)}</li>" for r in rows) + "</ul>",
    )
