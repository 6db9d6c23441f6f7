"""A model instance as the database loads it (Django's ModelState), from columns already read:
building a page's rows through Model.__init__ cost more than reading them."""

from __future__ import annotations

from django.db.models import Model
from django.db.models.base import ModelState


def loaded(model: type[Model], values: dict) -> Model:
    """An instance of `model` with `values` (attribute names), as `.only(*values)` would
    load it from the default database: a column left out is read on access."""
    instance = model.__new__(model)
    instance.__dict__.update(values)
    instance._state = ModelState()
    instance._state.adding, instance._state.db = False, "default"
    return instance
