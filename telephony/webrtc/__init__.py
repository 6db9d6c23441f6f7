"""The browser's leg of a call (issue 43): the telephony agent as a browser's WebRTC peer."""
