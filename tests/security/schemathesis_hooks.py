"""Schemathesis hooks for test_api_fuzz: how to send the API's one body that is not JSON, a
number's music on hold (`PUT /api/numbers/:id/hold-music`, `audio/wav`), which schemathesis
has no serializer for: as the raw bytes it generates for `format: binary`, the way it sends
`application/octet-stream`. Loaded through SCHEMATHESIS_HOOKS (a file path)."""

import schemathesis

schemathesis.serializer.alias("audio/wav", "application/octet-stream")
