"""Telephony: real calls over SIP. The telephony agent (agent.py, a process of its own) owns
the SIP endpoint and the media: it claims due calls, speaks their message (speech.py) and
reports every change through the call pipeline of realtime. sip/ is Relay's own SIP user
agent (messages, transports, transactions, SDP, RTP); provider.py is the worker's side.
"""
