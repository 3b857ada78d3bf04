#!lua
-- rollstat: the approximate sliding counter, shared through Redis.
--
-- Per rule i, two integer counters of admitted weight on the epoch-aligned
-- grid of fixed windows: KEYS[2i-1] for the current window, KEYS[2i] for the
-- previous one. All keys of one request carry the same hash tag.
--
-- ARGV: now_us, n, ttl_margin_ms, then (max_i, window_us_i, elapsed_us_i)
-- per rule, elapsed being the time since the current fixed window started.
--
-- Admits n iff for every rule prev * (W - elapsed) <= (max - curr - n) * W
-- (the previous window weighted by its remaining overlap, plus the current
-- one, plus n, at most max), compared without truncation. Exact in doubles
-- while max * W stays below 2^53 (e.g. a million per hour in microseconds).
-- Only then is n added to every current counter. Denials change nothing.
--
-- Returns {allowed (0/1), prev_1, curr_1, prev_2, curr_2, ...} after the
-- decision.
local n = tonumber(ARGV[2])
local margin = tonumber(ARGV[3])
local k = #KEYS / 2
local prev, curr = {}, {}
local allowed = 1
for i = 1, k do
  local max = tonumber(ARGV[1 + 3 * i])
  local win = tonumber(ARGV[2 + 3 * i])
  local elapsed = tonumber(ARGV[3 + 3 * i])
  curr[i] = tonumber(redis.call('GET', KEYS[2 * i - 1]) or '0')
  prev[i] = tonumber(redis.call('GET', KEYS[2 * i]) or '0')
  local room = max - curr[i] - n
  if room < 0 or (prev[i] > 0 and prev[i] * (win - elapsed) > room * win) then
    allowed = 0
  end
end
if allowed == 1 and n > 0 then
  for i = 1, k do
    local win = tonumber(ARGV[2 + 3 * i])
    curr[i] = redis.call('INCRBY', KEYS[2 * i - 1], n)
    -- The counter is read as the current window, then as the previous one.
    redis.call('PEXPIRE', KEYS[2 * i - 1], math.ceil(2 * win / 1000) + margin)
  end
end
local out = {allowed}
for i = 1, k do
  out[#out + 1] = prev[i]
  out[#out + 1] = curr[i]
end
return out
