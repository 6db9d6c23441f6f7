"""Calls to the virtual numbers, taken by the telephony agent (docs/telephony.md, "Inbound
calls"): `numbering` reads who called whom off the INVITE, `routing` decides what becomes of
the call (`InboundDesk`), `app_session` runs the number's voice application on it,
`forwarding` rings the owner's phones and tabs and bridges the first to take it, `voicemail`
answers it, and `mailbox` opens the owner's messages behind the PIN; `line` is what the last
two share of an answered call (speaking, playing, listening for keys).
"""
