"""CAPTCHA: arithmetic challenges and the one-use tokens a right answer earns.

Challenges and tokens live in the database so every process sees them; spending one is a
conditional UPDATE, so each is used once. Endpoints: /api/captcha, /api/captcha/verify.
"""
