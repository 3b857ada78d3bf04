-- rollstat: the exact sliding log, shared through Redis (after log_lib.lua).
--
-- KEYS: per rule i, the rule's log KEYS[2i-1] and its late set KEYS[2i].
-- Every key of one request carries the same hash tag, so this script touches
-- one Redis Cluster slot and decides all the rules of one key atomically.
-- The log's format is described in log_lib.lua.
--
-- ARGV: now_us, n, ttl_margin_ms, then (max_i, window_us_i) for each rule i.
--
-- Rule: a request of weight n at `now` is admitted iff, for every rule, the
-- admitted weight with scores in (now - W, now] plus n is at most max. Only
-- then is one member of weight n added to every log. A denied request
-- changes nothing in the counts; n = 0 is a peek.
--
-- Time never goes backwards on the log: a `now` older than the newest member
-- (another instance's clock is ahead of ours) is taken as that member's time.
--
-- Returns {allowed (0/1), now_used_us, retry_after_us, remaining_1,
-- reset_us_1, remaining_2, reset_us_2, ...}.
local now = tonumber(ARGV[1])
local n = tonumber(ARGV[2])
local margin = tonumber(ARGV[3])
local k = #KEYS / 2
local wins = {}
for i = 1, k do
  wins[i] = tonumber(ARGV[3 + 2 * i])
end
local e
e, now = prepare(now, wins, margin)

local count = {}
local top = {}
local newest = {}
local allowed = 1
local retry = 0
for i = 1, k do
  local log = KEYS[2 * i - 1]
  local max = tonumber(ARGV[2 + 2 * i])
  local win = wins[i]
  local ei = e[i]
  local c = 0
  if ei then
    local base = ei[2] - ei[3]
    c = ei[5] - base
    top[i] = ei[5]
    newest[i] = ei[4]
    if c + n > max then
      allowed = 0
      -- The (c + n - max)-th oldest unit must leave first; it leaves the
      -- window (t - W, t] when t reaches its member's score + W.
      local rt = unit_score(log, base + c + n - max, c + n - max - 1) + win - now
      if rt > retry then
        retry = rt
      end
    end
  elseif n > max then
    allowed = 0
  end
  count[i] = c
end

if allowed == 1 and n > 0 then
  for i = 1, k do
    local log = KEYS[2 * i - 1]
    local win = wins[i]
    local c1 = top[i] or 0
    if c1 + n > REBASE then
      splice(log, 0, 0, tail(log, 0))
      c1 = count[i]
    end
    redis.call('ZADD', log, us(now), string.format('%016d:%d', c1 + n, n))
    redis.call('PEXPIRE', log, math.ceil(win / 1000) + margin)
  end
end

local out = {allowed, now, retry}
for i = 1, k do
  local max = tonumber(ARGV[2 + 2 * i])
  local win = wins[i]
  local c = count[i]
  if allowed == 1 then
    c = c + n
  end
  -- Trimming removes the oldest members only: the newest is the one read
  -- after trimming, or `now` if this request was just added.
  local reset = 0
  if allowed == 1 and n > 0 then
    reset = win
  elseif c > 0 then
    reset = newest[i] + win - now
  end
  out[#out + 1] = max - c
  out[#out + 1] = reset
end
return out
