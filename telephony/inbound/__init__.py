"""Calls to the virtual numbers, taken by the telephony agent (docs/telephony.md, "Inbound
calls"): `numbering` reads who called whom off the INVITE, `routing` decides what becomes of
the call (`InboundDesk`), `app_session` runs the number's voice application on it,
`voicemail` answers it, and `mailbox` opens the owner's messages behind the PIN.
"""
