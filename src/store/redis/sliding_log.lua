-- rollstat: the exact sliding log, shared through Redis.
--
-- One sorted set per rule (KEYS[i]); every key of one request carries the
-- same hash tag, so this script touches one Redis Cluster slot and decides all
-- the rules of one key atomically.
--
-- Scores are microseconds since the Unix epoch (exact in a Lua/Redis double
-- up to 2^53 us, the year 2255). Members are unique strings, one per unit of
-- admitted weight.
--
-- ARGV: now_us, n, member_prefix, ttl_margin_ms, then (max_i, window_us_i)
-- for each key i.
--
-- Rule: a request of weight n at `now` is admitted iff, for every rule, the
-- number of members with scores in (now - W, now] plus n is at most max. Only
-- then are n members added to every set. A denied request changes nothing;
-- n = 0 is a peek.
--
-- Time never goes backwards on the log: a `now` older than the newest member
-- (another instance's clock is ahead of ours) is taken as that member's time.
--
-- Returns {allowed (0/1), now_used_us, retry_after_us, remaining_1,
-- reset_us_1, remaining_2, reset_us_2, ...}.
local now = tonumber(ARGV[1])
local n = tonumber(ARGV[2])
local prefix = ARGV[3]
local margin = tonumber(ARGV[4])
local k = #KEYS

local newest = {}
for i = 1, k do
  local last = redis.call('ZRANGE', KEYS[i], -1, -1, 'WITHSCORES')
  if last[2] then
    local t = tonumber(last[2])
    newest[i] = t
    if t > now then now = t end
  end
end

local count = {}
local allowed = 1
local retry = 0
for i = 1, k do
  local max = tonumber(ARGV[3 + 2 * i])
  local win = tonumber(ARGV[4 + 2 * i])
  redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', string.format('%d', now - win))
  local c = redis.call('ZCARD', KEYS[i])
  count[i] = c
  if c + n > max then
    allowed = 0
    -- The (c + n - max)-th oldest member must leave first; it leaves the
    -- window (t - W, t] when t reaches its score + W.
    local j = c + n - max - 1
    local e = redis.call('ZRANGE', KEYS[i], j, j, 'WITHSCORES')
    local r = tonumber(e[2]) + win - now
    if r > retry then retry = r end
  end
end

local score = string.format('%d', now)
if allowed == 1 and n > 0 then
  for i = 1, k do
    local win = tonumber(ARGV[4 + 2 * i])
    local j = 1
    while j <= n do
      local stop = math.min(n, j + 499)
      local batch = {}
      for m = j, stop do
        batch[#batch + 1] = score
        batch[#batch + 1] = prefix .. m
      end
      redis.call('ZADD', KEYS[i], unpack(batch))
      j = stop + 1
    end
    redis.call('PEXPIRE', KEYS[i], math.ceil(win / 1000) + margin)
  end
end

local out = {allowed, now, retry}
for i = 1, k do
  local max = tonumber(ARGV[3 + 2 * i])
  local win = tonumber(ARGV[4 + 2 * i])
  local c = count[i]
  if allowed == 1 then c = c + n end
  -- Trimming removes the oldest members only: the newest is the one read
  -- first, or `now` if this request was just added.
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
