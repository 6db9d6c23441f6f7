"""Voice applications: scripts of verbs (say, play, gather, record, dial, pause, hangup,
redirect) that a call runs, their validation, their TwiML form, and the hooks they call."""
