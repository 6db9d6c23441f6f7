"""Numbers (app label `numbers`): the inventory of provisioned numbers and the ones users hold.

Owns InventoryNumber, Number (alias, hashed PIN), PIN failures (the lock), and BlockedCaller
(callers blocked on a number). Creation spends a CAPTCHA token under the user's row lock, so
the plan limit holds under concurrent requests. Endpoints: /api/numbers*, including
/api/numbers/:id/blocked. The package is not called `numbers`: that would shadow the
standard library (docs/decisions.md).
"""
