"""How the ``redis`` state store reaches its server: the client library (imported only when a store is built),
a client with no automatic retries, the names of a run's keys, and every call through
:meth:`_Connection._call` — a script's own refusal told from a failure, a dropped connection tried once more
where that is harmless, and any other failure a ``RunStoreError`` naming the server, never its password.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import parse_qsl, urlsplit

from aeon_kernel import ConfigError, RunStoreError
from aeon_kernel.kit import failure_text

from .scripts import _Refused, register

if TYPE_CHECKING:
    import redis

T = TypeVar("T")


def _redact(url: str) -> tuple[str, list[str]]:
    """A form of ``url`` safe to show (no user info, no query), and the secrets it holds, to scrub from messages."""
    try:
        parts = urlsplit(url)
        secrets = [parts.password or ""] + [v for k, v in parse_qsl(parts.query) if k.lower() == "password"]
        host = parts.netloc.rpartition("@")[2]
    except ValueError:
        return "<invalid redis URL>", [url]
    return f"{parts.scheme}://{host}{parts.path}", [s for s in secrets if s]


class _Connection:
    """The client of a store and the calls it makes; the store (:class:`~aeon_plugins.redis_state.RedisStateStore`)
    sets the namespace and what messages may show of the URL before it connects."""

    namespace: str
    _display: str
    _secrets: list[str]

    def _import_client(self) -> None:
        """The client library, checked before anything else: without it, a ``ConfigError`` saying what to install."""
        try:
            import redis
            import redis.backoff
            import redis.retry
        except ImportError:
            raise ConfigError(
                "the 'redis' state store needs the redis client library: pip install 'aeon-core[redis]'"
            ) from None
        self._dropped: type[Exception] = redis.ConnectionError
        self._transient: tuple[type[Exception], ...] = (redis.ConnectionError, redis.TimeoutError)
        self._redis_error: type[Exception] = redis.RedisError
        self._response_error: type[Exception] = redis.ResponseError

    def _connect(self, raw_url: str, raw_password: str | None, socket_timeout: float) -> None:
        """The client and its scripts, then a first ping."""
        import redis
        from redis.backoff import NoBackoff
        from redis.retry import Retry

        options: dict[str, Any] = {} if raw_password is None else {"password": raw_password}
        try:
            # No automatic retries: a script whose reply was lost may have run. The store retries a dropped
            # connection once itself, and knows a retry refused for the first attempt's own work (_script).
            self._client: redis.Redis = redis.Redis.from_url(
                raw_url,
                socket_timeout=socket_timeout,
                socket_connect_timeout=socket_timeout,
                retry=Retry(NoBackoff(), 0),
                decode_responses=False,
                **options,
            )
        except (ValueError, TypeError) as exc:
            raise ConfigError(
                f"redis state store: cannot use the URL {self._display}: {self._scrub(exc)}"
            ) from None
        self._scripts = register(self._client)
        try:
            self._call("cannot connect", self._client.ping)  # a wrong URL or password fails here, at once
        except RunStoreError:
            self._client.close()
            raise

    @property
    def _index(self) -> str:
        return f"{self.namespace}runs"

    @property
    def _created(self) -> str:
        return f"{self.namespace}runs:created"

    def _namespaced(self, kind: str, run_id: bytes) -> bytes:
        return f"{self.namespace}{kind}".encode() + run_id

    def _keys(self, run_id: str) -> tuple[str, str, str]:
        """The run's hash, steps hash and cycles list (``run_id`` is UTF-8: callers check)."""
        return (
            f"{self.namespace}run:{run_id}",
            f"{self.namespace}steps:{run_id}",
            f"{self.namespace}cycles:{run_id}",
        )

    def _scrub(self, exc: BaseException) -> str:
        message = failure_text(exc).rstrip(". ") or type(exc).__name__
        for secret in self._secrets:
            message = message.replace(secret, "***")
        return message

    def _call(self, what: str, operation: Callable[[], T], *, retry: bool = False) -> T:
        """Run ``operation``: a script's refusal is a ``_Refused``; any other client error a RunStoreError naming
        the server (never its password). ``retry``: once more on a dropped connection (for what is harmless twice)."""
        for attempt in (1, 2):
            try:
                return operation()
            except self._transient as exc:
                if retry and attempt == 1 and isinstance(exc, self._dropped):
                    continue  # a pooled connection the server had dropped: one fresh connection may do
                raise RunStoreError(
                    f"the state store at {self._display} {what}: {self._scrub(exc)}. Is the server running "
                    "and reachable, and are the credentials right?"
                ) from None
            except self._response_error as exc:
                message = str(exc)
                if message.startswith("AEON "):
                    raise _Refused(message[5:]) from None
                raise RunStoreError(
                    f"the state store at {self._display} {what}: {self._scrub(exc)}"
                ) from None
            except self._redis_error as exc:
                raise RunStoreError(
                    f"the state store at {self._display} {what}: {self._scrub(exc)}"
                ) from None
        raise AssertionError("unreachable")  # pragma: no cover

    def _script(
        self, what: str, name: str, keys: list[str], args: list[str], *, landed: Callable[[], bool]
    ) -> None:
        """Run a write script; on a dropped connection, once more. A retry the script refuses may be refusing the
        first attempt's own work (the connection dropped after it ran, taking the reply): ``landed`` says whether
        that attempt's writes are there, and then it is done."""
        attempts = 0

        def once() -> Any:
            nonlocal attempts
            attempts += 1
            return self._scripts[name](keys=keys, args=args)

        try:
            self._call(what, once, retry=True)
        except _Refused:
            if attempts > 1 and self._call(what, landed, retry=True):
                return
            raise

    def _snapshot(self, queue: Callable[[Any], Any]) -> list[Any]:
        """The replies of the commands ``queue`` puts in one MULTI/EXEC (a consistent view); a command refused
        (a key of the wrong type) gives its error in place of its reply."""
        pipe = self._client.pipeline(transaction=True)
        queue(pipe)
        replies: list[Any] = pipe.execute(raise_on_error=False)
        return replies
