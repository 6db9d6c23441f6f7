"""Every private name of another library that Relay's code uses, in one list, and the check
that each is still there in the shape the code expects.

Relay reaches past a few libraries' public APIs where a measurement or a defect made it
(each module says why). pyproject.toml pins each such library to the release the code was
written against; this list names what the code touches, so that an upgrade that drops or
reshapes one fails tests/platform/test_conformance.py with the library, its installed
version and the name, instead of failing in production (a fast path that silently stays
off, a worker that no longer starts). Each edge names its off switch, the setting that
falls back to the library's public path while the code is brought up to a new release.

A name is checked as one of:
- Method(owner, name, params): a function of the class (or module), with exactly these
  parameter names, in order (self included);
- Assigned(owner, name): an instance attribute the class's own code (or a base's) sets,
  `self.<name> = ...`: such attributes are not on the class to getattr;
- Present(owner, name): any attribute of the class or module (a property, a value);
- Own(owner, name): defined by the class itself, not inherited (Relay keys on its identity).
"""

from __future__ import annotations

import importlib
import inspect
import re
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version


@dataclass(frozen=True)
class Method:
    owner: str
    name: str
    params: tuple[str, ...]


@dataclass(frozen=True)
class Assigned:
    owner: str
    name: str


@dataclass(frozen=True)
class Present:
    owner: str
    name: str


@dataclass(frozen=True)
class Own:
    owner: str
    name: str


Name = Method | Assigned | Present | Own


@dataclass(frozen=True)
class Edge:
    module: str  # Relay's module that uses the names
    distribution: str  # the library, as pip names it (and pyproject.toml pins it)
    switch: str | None  # the setting that turns the module's use of them off
    names: tuple[Name, ...]


def installed_version(distribution: str) -> str:
    try:
        return version(distribution)
    except PackageNotFoundError:
        return "not installed"


def resolve(dotted: str):
    """The module or class (module.Class[.Inner]) that `dotted` names; None when missing."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for part in parts[cut:]:
            found = getattr(found, part, None)
        return found
    return None


def _functions(cls) -> list:
    """The functions a class defines itself (methods, properties' getters and setters)."""
    found = []
    for value in vars(cls).values():
        if isinstance(value, staticmethod | classmethod):
            value = value.__func__
        if isinstance(value, property):
            found += [value.fget, value.fset]
        else:
            found.append(value)
    return [value for value in found if inspect.isfunction(value)]


def _assigned_in(owner, name: str) -> bool:
    # Read from each method's own source (its code object knows its file): a class whose
    # __module__ is its package's (psycopg.Connection) cannot be found by getsource itself.
    pattern = re.compile(rf"\bself\.{re.escape(name)}\s*(:[^=\n]+)?=[^=]")
    classes = inspect.getmro(owner) if inspect.isclass(owner) else ()
    for cls in classes:
        for function in _functions(cls):
            try:
                source = inspect.getsource(function)
            except (OSError, TypeError):
                continue
            if pattern.search(source):
                return True
    return False


def _problem(name: Name, owner) -> str | None:
    """What is wrong with `name` on `owner`, or None."""
    if owner is None:
        return "is missing (its owner does not import)"
    if isinstance(name, Assigned):
        return None if _assigned_in(owner, name.name) else "is never assigned"
    if not hasattr(owner, name.name):
        return "is missing"
    if isinstance(name, Own) and name.name not in vars(owner):
        return "is no longer the class's own (inherited)"
    if isinstance(name, Method):
        return _shape_problem(getattr(owner, name.name), name.params)
    return None


def _shape_problem(function, params: tuple[str, ...]) -> str | None:
    if not callable(function):
        return f"is no longer callable ({type(function).__name__})"
    try:
        found = tuple(inspect.signature(function).parameters)
    except (TypeError, ValueError):
        return None  # a builtin without a signature: callable is all that can be said
    if found != params:
        return f"takes ({', '.join(found)}), not ({', '.join(params)})"
    return None


def problems(edge: Edge) -> list[str]:
    """One line per name of `edge` that is missing or changed shape, each with the library's
    name and installed version."""
    release = f"{edge.distribution} {installed_version(edge.distribution)}"
    found = []
    for name in edge.names:
        problem = _problem(name, resolve(name.owner))
        if problem is not None:
            found.append(f"{release}: {name.owner}.{name.name} {problem} ({edge.module} uses it)")
    return found


GTHREAD = "gunicorn.workers.gthread"
DTLS = "aiortc.rtcdtlstransport.RTCDtlsTransport"
ICE = "aioice.ice.Connection"
PG = "django.db.backends.postgresql"
COMPILER = "django.db.models.sql.compiler.SQLCompiler"
DRF = "rest_framework.fields"
REDIS_LAYER = "channels_redis.core.RedisChannelLayer"
CHANNEL = "twisted.web.http.HTTPChannel"

EDGES = (
    Edge(
        "relay/platform/gunicorn_worker.py",
        "gunicorn",
        "GUNICORN_RELAY_WORKER",
        (
            Method(f"{GTHREAD}.ThreadWorker", "enqueue_req", ("self", "conn")),
            Method(f"{GTHREAD}.ThreadWorker", "finish_request", ("self", "conn", "fs")),
            Method(f"{GTHREAD}.ThreadWorker", "get_thread_pool", ("self",)),
            Method(f"{GTHREAD}.ThreadWorker", "handle", ("self", "conn")),
            Method(f"{GTHREAD}.ThreadWorker", "handle_http2", ("self", "conn")),
            Method(f"{GTHREAD}.ThreadWorker", "handle_quit", ("self", "sig", "frame")),
            Method(f"{GTHREAD}.ThreadWorker", "load_wsgi", ("self",)),
            Method(
                f"{GTHREAD}.ThreadWorker", "on_pending_socket_readable", ("self", "conn", "client")
            ),
            Assigned(f"{GTHREAD}.ThreadWorker", "tpool"),
            Assigned(f"{GTHREAD}.ThreadWorker", "poller"),
            Assigned(f"{GTHREAD}.ThreadWorker", "method_queue"),
            Assigned(f"{GTHREAD}.ThreadWorker", "pending_conns"),
            Assigned(f"{GTHREAD}.ThreadWorker", "wsgi"),
            Method(f"{GTHREAD}.PollableMethodQueue", "defer", ("self", "callback", "args")),
            Present(GTHREAD, "_DEFER"),  # what handle() returns for a connection put back
            Assigned(f"{GTHREAD}.TConn", "sock"),
            Assigned(f"{GTHREAD}.TConn", "timeout"),
            Assigned(f"{GTHREAD}.TConn", "initialized"),
            Assigned(f"{GTHREAD}.TConn", "data_ready"),
            Assigned(f"{GTHREAD}.TConn", "is_http2"),
            Present("gunicorn.config.Config", "is_ssl"),
        ),
    ),
    Edge(
        "telephony/webrtc/fastpath.py",
        "aiortc",
        "WEBRTC_FAST_PATH",
        (
            Assigned(DTLS, "_rx_srtp"),
            Assigned(DTLS, "_tx_srtp"),
            Present(DTLS, "transport"),
            Assigned("aiortc.rtcicetransport.RTCIceTransport", "_connection"),
            Assigned("aiortc.rtcrtpsender.RTCRtpSender", "_ssrc"),
            Present("aiortc.rtcrtpreceiver.RTCRtpReceiver", "transport"),
        ),
    ),
    Edge(
        "telephony/webrtc/fastpath.py",
        "aioice",
        "WEBRTC_FAST_PATH",
        (
            Assigned(ICE, "_nominated"),
            Assigned(ICE, "_protocols"),
            Assigned("aioice.ice.CandidatePair", "protocol"),
            Present("aioice.ice.CandidatePair", "remote_addr"),
            Method("aioice.ice.StunProtocol", "datagram_received", ("self", "data", "addr")),
            Assigned("aioice.ice.StunProtocol", "transport"),
        ),
    ),
    Edge(
        "telephony/webrtc/fastpath.py",  # hear_before_decoder, the browser leg's receive hook
        "aiortc",
        None,  # no public path hands over RTP before the decoder: the leg cannot work without
        (
            Method(
                "aiortc.rtcrtpreceiver.RTCRtpReceiver",
                "_handle_rtp_packet",
                ("self", "packet", "arrival_time_ms"),
            ),
        ),
    ),
    Edge(
        "relay/platform/postgresql/base.py",
        "Django",
        "DATABASE_PREPARED_STATEMENTS",
        (
            Present(f"{PG}.base", "ServerBindingCursor"),
            Method(f"{PG}.base.DatabaseWrapper", "create_cursor", ("self", "name")),
            Method(f"{PG}.base.DatabaseWrapper", "close_if_health_check_failed", ("self",)),
            Method(f"{PG}.base.DatabaseWrapper", "close_if_unusable_or_obsolete", ("self",)),
            Assigned(f"{PG}.base.DatabaseWrapper", "health_check_done"),
            Assigned(f"{PG}.base.DatabaseWrapper", "health_check_enabled"),
            Assigned(f"{PG}.base.DatabaseWrapper", "errors_occurred"),
            Method(
                f"{PG}.operations.DatabaseOperations",
                "last_executed_query",
                ("self", "cursor", "sql", "params"),
            ),
            Method(f"{PG}.operations.DatabaseOperations", "compose_sql", ("self", "sql", "params")),
        ),
    ),
    Edge(
        "relay/platform/postgresql/base.py",
        "psycopg",
        "DATABASE_PREPARED_STATEMENTS",
        (
            Assigned("psycopg.Connection", "cursor_factory"),
            Present("psycopg.Connection", "prepare_threshold"),
            Method("psycopg.Cursor", "execute", ("self", "query", "params", "prepare", "binary")),
        ),
    ),
    Edge(
        "core/platform/compiled.py",
        "Django",
        "COMPILED_QUERIES",
        (
            Method(
                "django.db.models.sql.query.Query",
                "get_compiler",
                ("self", "using", "connection", "elide_empty"),
            ),
            Assigned("django.db.models.sql.query.Query", "values_select"),
            Present("django.db.models.sql.query.Query", "extra_select"),
            Present("django.db.models.sql.query.Query", "annotation_select"),
            Method(COMPILER, "as_sql", ("self", "with_limits", "with_col_aliases")),
            Method(COMPILER, "get_converters", ("self", "expressions")),
            Assigned(COMPILER, "select"),
        ),
    ),
    Edge(
        "core/platform/representation.py",
        "djangorestframework",
        "COMPILED_REPRESENTATION",
        (
            Present("rest_framework.serializers.Serializer", "_readable_fields"),
            Own("rest_framework.serializers.Serializer", "to_representation"),
            Own("rest_framework.serializers.ListSerializer", "to_representation"),
            Own(f"{DRF}.CharField", "to_representation"),
            Own(f"{DRF}.IntegerField", "to_representation"),
            Own(f"{DRF}.FloatField", "to_representation"),
            Own(f"{DRF}.UUIDField", "to_representation"),
            Assigned(f"{DRF}.UUIDField", "uuid_format"),
            Method(f"{DRF}.Field", "get_attribute", ("self", "instance")),
            Assigned(f"{DRF}.Field", "source_attrs"),
            Assigned(f"{DRF}.Field", "field_name"),
            Present(DRF, "SkipField"),
        ),
    ),
    Edge(
        "relay/platform/channel_layer.py",
        "channels-redis",
        "CHANNEL_LAYER_FAST_PATHS",  # its bounds stay: an override no base calls is inert
        (
            Method(REDIS_LAYER, "_brpop_with_clean", ("self", "index", "channel", "timeout")),
            Method(REDIS_LAYER, "_clean_receive_backup", ("self", "index", "channel")),
            Method(REDIS_LAYER, "_group_key", ("self", "group")),
            Method(
                REDIS_LAYER, "_map_channel_keys_to_connection", ("self", "channel_names", "message")
            ),
            Method(REDIS_LAYER, "receive_single", ("self", "channel")),
            Method(REDIS_LAYER, "create_pool", ("self", "index")),
            Method(REDIS_LAYER, "connection", ("self", "index")),
            Method(REDIS_LAYER, "consistent_hash", ("self", "value")),
            Assigned(REDIS_LAYER, "client_prefix"),
            Assigned(REDIS_LAYER, "hosts"),
            Assigned(REDIS_LAYER, "capacity"),
            Assigned(REDIS_LAYER, "expiry"),
            Assigned(REDIS_LAYER, "group_expiry"),
            Present("channels_redis.utils", "create_pool"),
        ),
    ),
    Edge(
        "relay/platform/daphne_server.py",
        "Twisted",
        "DAPHNE_JSON_REFUSALS",
        (
            Method(CHANNEL, "_respondToBadRequestAndDisconnect", ("self",)),
            Method(CHANNEL, "lineLengthExceeded", ("self", "line")),
            Method(CHANNEL, "lineReceived", ("self", "line")),
            Assigned(CHANNEL, "_receivedHeaderSize"),
            Present(CHANNEL, "totalHeadersSize"),
            Present("twisted.web.http", "_GenericHTTPChannelProtocol"),
        ),
    ),
    Edge(
        "relay/platform/daphne_server.py",
        "daphne",
        "DAPHNE_JSON_REFUSALS",
        (
            Present("daphne.server", "HTTPFactory"),  # replaced in the module, as Server reads it
            Present("daphne.server", "WebSocketFactory"),
            Method(
                "daphne.http_protocol.WebRequest",
                "basic_error",
                ("self", "status", "status_text", "body"),
            ),
            Method("daphne.ws_protocol.WebSocketProtocol", "handle_reply", ("self", "message")),
            Assigned("daphne.ws_protocol.WebSocketProtocol", "handshake_deferred"),
        ),
    ),
    # Found by grep outside the list; no off switch of their own (see the report).
    Edge(
        "core/platform/cache.py",
        "Django",
        None,
        (
            Present("django.core.cache.backends.redis.RedisCache", "_cache"),
            Method(
                "django.core.cache.backends.redis.RedisCacheClient",
                "get_client",
                ("self", "key", "write"),
            ),
        ),
    ),
    Edge(
        "core/platform/models.py",  # a row's instance built from its columns, as from_db does
        "Django",
        None,
        (
            Present("django.db.models.base.ModelState", "adding"),
            Present("django.db.models.base.ModelState", "db"),
        ),
    ),
    Edge(
        "core/platform/tasks.py",
        "django-tasks-db",
        None,
        (Method("django_tasks_db.backend.DatabaseBackend", "_get_id", ("self",)),),
    ),
    Edge(
        "core/platform/schema.py",
        "drf-spectacular",
        None,
        (
            Method(
                "drf_spectacular.openapi.AutoSchema", "_get_request_body", ("self", "direction")
            ),
            Method(
                "drf_spectacular.openapi.AutoSchema",
                "_resolve_path_parameters",
                ("self", "variables"),
            ),
        ),
    ),
)
