"""Accounts: who the users are and how they prove it.

Owns the User (e-mail login, UUID key, plan, Matrix id), login Sessions (each JWT carries one),
the API key (looked up by digest, stored encrypted) and the authentication classes that accept
a JWT or an API key on every authenticated endpoint. Endpoints: /api/auth/*, /api/user/*,
/api/dashboard.
"""
