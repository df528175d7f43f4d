"""Redis's options, SeaTunnel's names and defaults (its Redis sink and source pages), declared once."""

from __future__ import annotations

from seatide.plugin.base import PERMANENT_MARK, PermanentError
from seatide.plugin.options import INT, LIST, REQUIRED, STRING, Option, enum
from seatide.plugin.schema import schema_options

DATA_TYPES = ("key", "hash", "list", "set", "zset")

# What the sink and the source share: where the server is and who connects.
CONNECTION = (
    Option("host", STRING, REQUIRED, "the Redis server's host"),
    Option("port", INT, REQUIRED, "the Redis server's port"),
    Option("user", STRING, None, "the ACL user to connect as (Redis 6 and later); with auth"),
    Option("auth", STRING, None, "the password (of user, or the server's requirepass)"),
    Option("db_num", INT, 0, "the database index"),
    Option("mode", enum("single", "cluster"), "single",
           "single (one server); cluster is refused: a batch is written in one transaction of one server"),
    Option("nodes", LIST, None, "cluster nodes, host:port (mode = cluster, which is refused)"),
    Option("data_type", enum(*DATA_TYPES), REQUIRED,
           "key (a string value), hash, list, set or zset (score 1)"),
    Option("batch_size", INT, 10, "accepted for compatibility: each micro-batch is written in one transaction"),
)

SINK = (
    *CONNECTION,
    Option("format", enum("json"), "json", "the values' format: json, a row as a JSON object (SeaTunnel's only one)"),
    Option("key", STRING, REQUIRED, "the name of the field whose value is each row's key; when the input has no "
           "such field, the key itself"),
    Option("expire", INT, -1, "seconds until a key written expires; -1: never"),
)

SOURCE = (
    *CONNECTION,
    Option("format", enum("json", "text"), "json",
           "json: each value parsed as a row of schema's fields; text: each value one row of one field, content"),
    Option("keys", STRING, REQUIRED, "the keys to read, a Redis glob pattern (SCAN MATCH), e.g. user:*"),
    Option("hash_key_parse_mode", enum("all", "kv"), "all",
           "a hash: all (the hash is one row, its fields the row's fields) or kv (each field a row: the field's "
           "name in hash_key, its value parsed by the schema)"),
    *schema_options(),      # the rows' fields (format = json)
)


def check_connection(plugin) -> None:
    """The checks both plugins make of the options they share."""
    opts = plugin.opts
    if opts["mode"] == "cluster":
        raise plugin.invalid("mode", "option 'mode': cluster is not supported; SeaTide writes each micro-batch "
                                     "in one transaction of one Redis server (mode = single, the default, with "
                                     "host and port)")
    if not 0 < opts["port"] < 65536:
        raise plugin.invalid("port", f"option 'port' must be a TCP port (1-65535), got {opts['port']}")
    if opts["db_num"] < 0:
        raise plugin.invalid("db_num", f"option 'db_num' must be 0 or more, got {opts['db_num']}")
    if opts["user"] is not None and opts["auth"] is None:
        raise plugin.invalid("user", "option 'user' needs 'auth', the user's password")


def connect(opts):
    """A client of the server the options name; raises RedisError naming the server when it cannot be reached."""
    import redis

    client = redis.Redis(host=opts["host"], port=opts["port"], db=opts["db_num"], username=opts["user"],
                         password=opts["auth"], socket_connect_timeout=10, socket_timeout=60,
                         decode_responses=False)
    try:
        client.ping()
    except redis.AuthenticationError as exc:
        client.close()
        # Permanent: every retry would be refused alike, each after job.retry.interval.seconds.
        raise RedisAuthError(f"{PERMANENT_MARK}Redis at {opts['host']}:{opts['port']}: authentication failed "
                             f"({exc}); check user and auth") from None
    except redis.RedisError as exc:
        client.close()
        raise RedisError(f"Redis at {opts['host']}:{opts['port']} (db {opts['db_num']}) cannot be reached: "
                         f"{exc}") from None
    return client


class RedisError(RuntimeError):
    pass


class RedisAuthError(RedisError, PermanentError):
    """The server refused the user or password. Its text carries PERMANENT_MARK: ``connect`` runs in
    Spark's Python workers too (a checkpointed source's scan), whence only the text reaches the driver."""


__all__ = ["CONNECTION", "DATA_TYPES", "SINK", "SOURCE", "RedisAuthError", "RedisError", "check_connection", "connect"]
