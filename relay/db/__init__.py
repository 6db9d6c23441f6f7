"""Relay's database backends: Django's, with what Relay changes about them."""
