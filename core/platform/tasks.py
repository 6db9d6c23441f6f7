"""django-tasks-db's id for a new task row (a private method of its backend): tasks enqueued
together (core.taskqueue) are written as the rows the backend writes itself."""

from __future__ import annotations

from django_tasks_db.backend import DatabaseBackend


def task_id(backend: DatabaseBackend):
    """The id `backend` would give the next task it enqueues."""
    return backend._get_id()
