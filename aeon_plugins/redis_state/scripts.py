"""The Lua scripts of the ``redis`` state store: every write is one of them, so it is atomic and isolated.

Each checks before it writes, so a refusal — an error reply ``AEON <code> <detail>``, seen by the store as a
:class:`_Refused` — leaves everything as it was. :func:`register` loads them on a client; the store runs them
through its connection (:mod:`aeon_plugins.redis_state.connection`), which retries a dropped one once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    import redis
    from redis.commands.core import Script

# --- the scripts: each checks before it writes, so a refusal (an error reply) leaves everything as it was -------

_LUA_HELPERS: Final = """
local function hset(key, first, last)
  for i = first, last, 1000 do
    redis.call('HSET', key, unpack(ARGV, i, math.min(i + 999, last)))
  end
end
-- nil when KEYS[n] is one of the kinds, else the refusal 'AEON type n kind' (checked before anything is written)
local function unexpected(n, ...)
  local found = redis.call('TYPE', KEYS[n]).ok
  for _, kind in ipairs({...}) do
    if found == kind then return nil end
  end
  return redis.error_reply('AEON type ' .. n .. ' ' .. found)
end
"""

#: KEYS run, steps, cycles, index, created. ARGV run_id, n, n field/value pairs of the run, then the step pairs.
_CREATE: Final = (
    _LUA_HELPERS
    + """
if redis.call('EXISTS', KEYS[1], KEYS[2], KEYS[3]) > 0 then
  return redis.error_reply('AEON exists')
end
local refused = unexpected(4, 'zset', 'none') or unexpected(5, 'string', 'none')
if refused then return refused end
local order = redis.call('INCR', KEYS[5])
local n = tonumber(ARGV[2])
hset(KEYS[1], 3, 2 + 2 * n)
hset(KEYS[2], 3 + 2 * n, #ARGV)
redis.call('ZADD', KEYS[4], order, ARGV[1])
return order
"""
)

#: KEYS run, steps, cycles. ARGV token ('' = unchecked), cycles stored before this one ('' = no record), the
#: record, '1' to replace every step, seconds to expire in ('' = never), then n and n field/value pairs to set,
#: m and m fields to delete, and the step pairs to the end.
_WRITE: Final = (
    _LUA_HELPERS
    + """
local found = redis.call('TYPE', KEYS[1]).ok
if found == 'none' then return redis.error_reply('AEON missing') end
local refused = unexpected(1, 'hash') or unexpected(2, 'hash', 'none') or unexpected(3, 'list', 'none')
if refused then return refused end
if ARGV[1] ~= '' and redis.call('HGET', KEYS[1], 'owner_token') ~= ARGV[1] then
  return redis.error_reply('AEON taken')
end
if ARGV[2] ~= '' then
  local stored = redis.call('LLEN', KEYS[3])
  if stored ~= tonumber(ARGV[2]) then return redis.error_reply('AEON cycles ' .. stored) end
end
local i = 6
local n = tonumber(ARGV[i])
hset(KEYS[1], i + 1, i + 2 * n)
i = i + 2 * n + 1
n = tonumber(ARGV[i])
if n > 0 then redis.call('HDEL', KEYS[1], unpack(ARGV, i + 1, i + n)) end
i = i + n + 1
if ARGV[4] == '1' then redis.call('DEL', KEYS[2]) end
hset(KEYS[2], i, #ARGV)
if ARGV[2] ~= '' then redis.call('RPUSH', KEYS[3], ARGV[3]) end
if ARGV[5] ~= '' then
  for _, key in ipairs(KEYS) do redis.call('EXPIRE', key, ARGV[5]) end
end
return 1
"""
)

#: KEYS run. ARGV the owner token read ('' = none), then the new owner: token, pid, host.
_CLAIM: Final = (
    _LUA_HELPERS
    + """
if redis.call('TYPE', KEYS[1]).ok == 'none' then return redis.error_reply('AEON missing') end
local refused = unexpected(1, 'hash')
if refused then return refused end
if redis.call('HGET', KEYS[1], 'status') ~= 'running' then return redis.error_reply('AEON finished') end
if (redis.call('HGET', KEYS[1], 'owner_token') or '') ~= ARGV[1] then return redis.error_reply('AEON changed') end
redis.call('HSET', KEYS[1], 'owner_token', ARGV[2], 'owner_pid', ARGV[3], 'owner_host', ARGV[4])
return 1
"""
)

#: KEYS run. ARGV token: the owner fields go only if that token still holds the run.
_RELEASE: Final = """
if redis.call('TYPE', KEYS[1]).ok == 'hash' and redis.call('HGET', KEYS[1], 'owner_token') == ARGV[1] then
  return redis.call('HDEL', KEYS[1], 'owner_pid', 'owner_host', 'owner_token')
end
return 0
"""

#: KEYS run, steps, cycles, index. ARGV run_id: a run whose keys have all gone (expired) leaves the index.
_PRUNE: Final = """
if redis.call('EXISTS', KEYS[1], KEYS[2], KEYS[3]) == 0 then return redis.call('ZREM', KEYS[4], ARGV[1]) end
return 0
"""


#: KEYS run, steps, cycles, index. ARGV run_id, the owner token read ('' = none): the run goes, unless claimed since.
_DELETE: Final = """
if redis.call('TYPE', KEYS[1]).ok == 'hash' and (redis.call('HGET', KEYS[1], 'owner_token') or '') ~= ARGV[2] then
  return redis.error_reply('AEON changed')
end
return redis.call('DEL', KEYS[1], KEYS[2], KEYS[3]) + redis.call('ZREM', KEYS[4], ARGV[1])
"""


class _Refused(Exception):
    """A script's own refusal (``AEON ...``): the check that failed, and what it found."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.code, _, self.detail = reason.partition(" ")


def register(client: redis.Redis) -> dict[str, Script]:
    """The scripts, by the names the store calls them, registered on ``client``."""
    return {
        name: client.register_script(source)
        for name, source in (
            ("create", _CREATE),
            ("write", _WRITE),
            ("claim", _CLAIM),
            ("release", _RELEASE),
            ("prune", _PRUNE),
            ("delete", _DELETE),
        )
    }
