"""Querysets compiled to SQL once per process, then run with new values on every call.

For the reads every request makes (the session behind a JWT, the owner of an API key, a
user's quotas), building the SQL through the ORM cost several times what running it did
(docs/benchmarks.md, issue 29). A CompiledQuery builds its queryset once, with a stand-in
value for each placeholder, compiles it, and remembers where in the statement's parameters
each stand-in went; a call puts its own values there, in the database's form (the
placeholder's model field prepares them, as the ORM would), and runs the statement. Rows come
back as dicts keyed by the names `values()` would give, with the ORM's converters applied,
so a caller sees what the queryset itself would have returned.

Only values may vary, and which placeholders are given: a call that leaves one out has
`build` called without it (a filter left off), a statement of its own, compiled once too.
Anything else that changes the SQL (a LIMIT) needs a CompiledQuery of its own. Nothing is
cached but the SQL text (and, on PostgreSQL, the statement prepared on each connection, so
that it is not parsed and planned again on every call): every call reads the database afresh.

This drives Django's SQL compiler past its public API (get_compiler, as_sql, get_converters,
values_select; tests/platform/edges.py checks each). COMPILED_QUERIES=false runs every call
as its queryset instead, the same rows through the ORM.
"""

from __future__ import annotations

import secrets
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from django.conf import settings
from django.core.exceptions import EmptyResultSet
from django.db import connections, models


def prepared_cursor(connection):
    """A cursor whose statements the database prepares, where the backend offers one
    (relay.platform.postgresql: each statement parsed and planned once per connection, not on every
    run); else a plain cursor."""
    prepared = getattr(connection, "prepared_cursor", None)
    return connection.cursor() if prepared is None else prepared()


def compiling() -> bool:
    """Whether queries are compiled (COMPILED_QUERIES), or run as their querysets."""
    return getattr(settings, "COMPILED_QUERIES", True)


def _stand_in(field: models.Field):
    """A value of `field`'s type that no real argument will equal by chance."""
    if isinstance(field, models.UUIDField):
        return uuid.uuid4()
    if isinstance(field, models.DateTimeField):
        return datetime(1971, 2, 3, 4, 5, 6, secrets.randbelow(10**6), tzinfo=UTC)
    if isinstance(field, models.CharField):
        return "stand-in-" + secrets.token_hex(16)
    raise TypeError(f"no stand-in value for a {type(field).__name__} placeholder")


@dataclass(frozen=True)
class _Statement:
    sql: str
    params: tuple  # the compiled parameters, stand-ins included
    slots: tuple[tuple[int, str], ...]  # (position in params, placeholder name)
    names: tuple[str, ...]  # the result's columns, as values() names them
    converters: tuple  # (column index, converter functions, expression), as the ORM's


class CompiledQuery:
    """`build(**placeholders)` compiled once per database alias and run with new values.

    `placeholders` maps each keyword of `build` to the model field whose column its value is
    compared with (an unbound field of the same type will do): it prepares each value as the
    ORM would. `build` must return a `values()` queryset and use every placeholder it is
    given as a lookup value (not a LIMIT, not inside raw SQL); placeholders a call leaves out
    are not passed to it.
    """

    def __init__(self, build: Callable[..., models.QuerySet], **placeholders: models.Field):
        self.build = build
        self.placeholders = placeholders
        self._statements: dict[tuple, _Statement] = {}

    def _compile(self, using: str, given: tuple[str, ...]) -> _Statement:
        connection = connections[using]
        stand_ins = {name: _stand_in(self.placeholders[name]) for name in given}
        queryset = self.build(**stand_ins).using(using)
        query = queryset.query
        compiler = query.get_compiler(using=using)
        sql, params = compiler.as_sql()
        prepared = {
            name: self.placeholders[name].get_db_prep_value(stand_in, connection)
            for name, stand_in in stand_ins.items()
        }
        slots = tuple(
            (position, name)
            for position, value in enumerate(params)
            for name, stand_in in prepared.items()
            if type(value) is type(stand_in) and value == stand_in
        )
        missing = set(given) - {name for _, name in slots}
        if missing:
            raise ValueError(f"placeholders not found in the compiled query: {sorted(missing)}")
        names = (*query.extra_select, *query.values_select, *query.annotation_select)
        selected = [column for column, _sql, _alias in compiler.select]
        if len(names) != len(selected):
            raise ValueError("build() must return a values() queryset")
        converters = tuple(
            (index, tuple(functions), expression)
            for index, (functions, expression) in compiler.get_converters(selected).items()
        )
        return _Statement(sql, tuple(params), slots, names, converters)

    def rows(self, using: str = "default", **values) -> list[dict]:
        """The rows the queryset built with `values` returns, as dicts (values() rows)."""
        if not compiling():
            return list(self.build(**values).using(using))
        given = tuple(sorted(values))
        statement = self._statements.get((using, given))
        if statement is None:
            unknown = set(given) - set(self.placeholders)
            if unknown:
                raise TypeError(f"unknown placeholders: {sorted(unknown)}")
            statement = self._statements[using, given] = self._compile(using, given)
        connection = connections[using]
        params = list(statement.params)
        for position, name in statement.slots:
            params[position] = self.placeholders[name].get_db_prep_value(values[name], connection)
        with prepared_cursor(connection) as cursor:
            cursor.execute(statement.sql, params)
            fetched = cursor.fetchall()
        out = []
        for row in fetched:
            row = list(row)
            for index, functions, expression in statement.converters:
                for convert in functions:
                    row[index] = convert(row[index], expression, connection)
            out.append(dict(zip(statement.names, row, strict=True)))
        return out

    def first(self, using: str = "default", **values) -> dict | None:
        """The first row, or None."""
        found = self.rows(using, **values)
        return found[0] if found else None


class CompiledInQuery:
    """A CompiledQuery whose `lists` placeholders are lists of values (each an `__in`
    lookup's), of any length.

    Compiled once per size bucket of each list, the next power of two at least its length (0
    for an empty list, which `build` then gets as []), so a process holds a few statements, not
    one per length. A list shorter than its bucket is padded with its own first value, which
    an IN matches once: the rows are the unpadded list's. An empty list that leaves no row to
    match (a filter's own IN, not a subquery's) returns [] without a statement, as the
    queryset does.
    """

    def __init__(
        self,
        build: Callable[..., models.QuerySet],
        *,
        lists: dict[str, models.Field],
        **placeholders: models.Field,
    ):
        self.build = build
        self.lists = lists
        self.placeholders = placeholders
        self._by_sizes: dict[tuple[int, ...], CompiledQuery] = {}
        self._nothing: set[tuple[int, ...]] = set()  # sizes whose query can match no row

    @staticmethod
    def _bucket(length: int) -> int:
        return 0 if length == 0 else 1 << (length - 1).bit_length()

    def _compiled(self, sizes: tuple[int, ...]) -> CompiledQuery:
        query = self._by_sizes.get(sizes)
        if query is None:
            slots = {
                name: [f"{name}__{n}" for n in range(size)]
                for name, size in zip(self.lists, sizes, strict=True)
            }

            def build(**given):
                lists = {name: [given.pop(slot) for slot in names] for name, names in slots.items()}
                return self.build(**lists, **given)

            fields = {slot: self.lists[name] for name, names in slots.items() for slot in names}
            query = self._by_sizes[sizes] = CompiledQuery(build, **fields, **self.placeholders)
        return query

    def rows(self, using: str = "default", **values) -> list[dict]:
        """The rows the queryset built with `values` returns (each of `lists` a list)."""
        if not compiling():
            return list(self.build(**values).using(using))
        lists = {name: list(dict.fromkeys(values.pop(name))) for name in self.lists}
        sizes = tuple(self._bucket(len(items)) for items in lists.values())
        for name, items in lists.items():
            bucket = self._bucket(len(items))
            padded = items + items[:1] * (bucket - len(items))
            values.update({f"{name}__{n}": item for n, item in enumerate(padded)})
        if sizes in self._nothing:
            return []
        try:
            return self._compiled(sizes).rows(using, **values)
        except EmptyResultSet:  # an empty list where no row can match: as the queryset
            self._nothing.add(sizes)
            return []
