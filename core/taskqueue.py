"""Tasks enqueued together: inside `enqueued_together()`, every `enqueue` is held and the
tasks are written in one INSERT as the block ends, where django-tasks writes one row per
task. A batch of submits queues a step for each call and a delivery for each webhook event;
one statement for all of them keeps the batch's round trips fixed, whatever its size.

The rows are the ones django_tasks_db's DatabaseBackend writes itself (its `enqueue`:
the same columns, and `run_after` at the backend's "no date" when the task has none, as
its pre_save handler sets it), without its `task_enqueued` signal (a debug log line); a
task of another backend is enqueued at once, as usual.
Call it inside the transaction the tasks belong to: they commit with it or not at all.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from contextlib import contextmanager

from django_tasks.base import Task
from django_tasks.utils import normalize_json
from django_tasks_db.backend import DatabaseBackend
from django_tasks_db.models import DBTaskResult, get_date_max

from core.platform.tasks import task_id

_held: contextvars.ContextVar[list | None] = contextvars.ContextVar("tasks_held", default=None)


def enqueue(task: Task, **kwargs) -> None:
    """`task.enqueue(**kwargs)`, held until the end of the enclosing `enqueued_together()`
    when there is one (and the task's backend is the database's)."""
    held = _held.get()
    backend = task.get_backend()
    if held is None or not isinstance(backend, DatabaseBackend):
        task.enqueue(**kwargs)
        return
    backend.validate_task(task)
    held.append(
        DBTaskResult(
            id=task_id(backend),
            args_kwargs=normalize_json({"args": [], "kwargs": kwargs}),
            priority=task.priority,
            task_path=task.module_path,
            queue_name=task.queue_name,
            run_after=task.run_after or get_date_max(),
            backend_name=backend.alias,
        )
    )


@contextmanager
def enqueued_together() -> Iterator[None]:
    """Hold the block's `enqueue`s and write them in one INSERT at its end (nothing when the
    block raises: its transaction is rolled back anyway). Nested blocks write with the
    outermost."""
    if _held.get() is not None:
        yield
        return
    held: list = []
    token = _held.set(held)
    try:
        yield
    finally:
        _held.reset(token)
    if held:
        DBTaskResult.objects.bulk_create(held)
