/**
 * Lua scripts run atomically in Redis. Fencing: a run's attempt key holds the attempt that owns its
 * stream; whoever claims attempt N in PostgreSQL raises it to N (never lowers it), and an append
 * names its attempt, so a replica that lost its lease (a zombie attempt 1, partitioned but alive)
 * cannot interleave events with attempt 2.
 */

/**
 * KEYS: stream, attempt. ARGV: attempt, approximate max length, expiry seconds, then triples
 * (seq, kind, payload…): kind `ev` carries event name and JSON; kind `end` carries the status.
 * Returns the number of entries added, -1 when fenced, -2 when the attempt key was missing (Redis
 * restarted without its data: the writer takes the key and refills the stream from its attempt's
 * first event; PostgreSQL's lease still decides who executes). Entries at or below the stream's
 * top are skipped (a retried batch).
 */
export const APPEND_SCRIPT = `
local cur = redis.call('GET', KEYS[2])
if cur == false then
  redis.call('SET', KEYS[2], ARGV[1], 'EX', tonumber(ARGV[3]))
  return -2
end
if cur ~= ARGV[1] then return -1 end
local top = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)
local topSeq = 0
if #top > 0 then topSeq = tonumber(string.match(top[1][1], '-(%d+)$')) end
local added = 0
local i = 4
while i + 3 <= #ARGV do
  local seq = tonumber(ARGV[i])
  if seq > topSeq then
    if ARGV[i + 1] == 'end' then
      redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[2], '0-' .. seq, 'end', ARGV[i + 2])
    else
      redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[2], '0-' .. seq, 'e', ARGV[i + 2], 'd', ARGV[i + 3])
    end
    topSeq = seq
    added = added + 1
  end
  i = i + 4
end
if topSeq > 0 then redis.call('EXPIRE', KEYS[1], tonumber(ARGV[3])) end
redis.call('EXPIRE', KEYS[2], tonumber(ARGV[3]))
return added
`;

/**
 * KEYS: stream, attempt. ARGV: attempt, expiry seconds. Raises the attempt key to ARGV[1] (never
 * lowers it) and answers the top sequence number of the stream (0 when empty), from which the new
 * attempt continues numbering; -1 when a later attempt already owns the stream.
 */
export const CLAIM_SCRIPT = `
local cur = redis.call('GET', KEYS[2])
if cur ~= false and tonumber(cur) > tonumber(ARGV[1]) then return -1 end
redis.call('SET', KEYS[2], ARGV[1], 'EX', tonumber(ARGV[2]))
local top = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)
if #top == 0 then return 0 end
return tonumber(string.match(top[1][1], '-(%d+)$'))
`;

/**
 * KEYS: a thread's protocol stream, and (for a run's pump on its executing replica) the pump's key.
 * ARGV: approximate max length, expiry seconds, the writer's floor (the highest seq it has seen:
 * after Redis lost the stream, numbering goes on from there rather than restarting at 1), the
 * pump's attempt and the last run event the batch converts (-1: none), then quadruples (uid, event
 * JSON, run id, assistant id). Numbers the events after the stream's top, atomically, so replicas
 * appending to one thread never reuse a seq. A batch whose last uid is already the top entry's was
 * applied (a retry after a lost reply) and adds nothing. With a pump key the batch is fenced like a
 * run's events: refused once a later attempt took the pump, and it records how far the run's
 * events are converted, from where the next attempt's pump continues. Returns the first seq
 * assigned, 0 for an applied retry, -1 when fenced.
 */
export const THREAD_APPEND_SCRIPT = `
if #KEYS > 1 then
  local cur = redis.call('HGET', KEYS[2], 'a')
  if cur ~= false and tonumber(cur) > tonumber(ARGV[4]) then return -1 end
end
local top = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)
local seq = tonumber(ARGV[3])
if #top > 0 then
  local fields = top[1][2]
  for j = 1, #fields, 2 do
    if fields[j] == 'u' and fields[j + 1] == ARGV[#ARGV - 3] then return 0 end
  end
  local topSeq = tonumber(string.match(top[1][1], '-(%d+)$'))
  if topSeq > seq then seq = topSeq end
end
local first = seq + 1
local i = 6
while i + 3 <= #ARGV do
  seq = seq + 1
  redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[1], '0-' .. seq, 'u', ARGV[i], 'p', ARGV[i + 1], 'r', ARGV[i + 2], 'a', ARGV[i + 3])
  i = i + 4
end
redis.call('EXPIRE', KEYS[1], tonumber(ARGV[2]))
if #KEYS > 1 then
  redis.call('HSET', KEYS[2], 'a', ARGV[4])
  if tonumber(ARGV[5]) >= 0 then redis.call('HSET', KEYS[2], 'n', ARGV[5]) end
  redis.call('EXPIRE', KEYS[2], tonumber(ARGV[2]))
end
return first
`;

/**
 * KEYS: a run's pump key (in its thread's slot). ARGV: attempt, expiry seconds. Takes the pump for
 * an attempt (raising the key, never lowering it: the earlier attempt's appends are refused from
 * now on) and answers the last run event already converted into the thread's log, -1 when none,
 * -2 when a later attempt holds the pump.
 */
export const THREAD_PUMP_CLAIM_SCRIPT = `
local cur = redis.call('HGET', KEYS[1], 'a')
if cur ~= false and tonumber(cur) > tonumber(ARGV[1]) then return -2 end
redis.call('HSET', KEYS[1], 'a', ARGV[1])
redis.call('EXPIRE', KEYS[1], tonumber(ARGV[2]))
local n = redis.call('HGET', KEYS[1], 'n')
if n == false then return -1 end
return tonumber(n)
`;
