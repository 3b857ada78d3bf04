-- rollstat: several exact sliding logs decided together, all or nothing
-- (after log_lib.lua): the descriptors of one rate-limit request, each
-- with its own limit and weight.
--
-- KEYS: per log i, the log KEYS[2i-1] and its late set KEYS[2i]. On a
-- Redis Cluster the caller sends only logs of one slot per call.
--
-- ARGV: now_us, ttl_margin_ms, record (0/1), then (max_i, window_us_i, n_i,
-- soft_i) for each log i.
--
-- Rule: log i fits if its admitted weight in (now - W_i, now] plus n_i is at
-- most max_i. The request is allowed if every log that is not soft fits (a
-- soft log, a rule in shadow mode, is checked but never refuses). Only if
-- the request is allowed and `record` is 1 is one member of weight n_i
-- added to each log that fits and has n_i > 0; otherwise nothing changes.
--
-- Time never goes backwards on a log, as in sliding_log.lua.
--
-- Returns {allowed (0/1), now_used_us, then per log i: fits_i (0/1),
-- remaining_i (max_i minus the weight in the window after this call; may be
-- negative after a limit was lowered), wait_us_i (the time until one more
-- unit of weight fits: 0 while remaining_i > 0)}.
local asked = tonumber(ARGV[1])
local margin = tonumber(ARGV[2])
local record = ARGV[3] == '1'
local k = #KEYS / 2
local maxes, wins, ns, soft = {}, {}, {}, {}
for i = 1, k do
  local a = 4 * i
  maxes[i] = tonumber(ARGV[a])
  wins[i] = tonumber(ARGV[a + 1])
  ns[i] = tonumber(ARGV[a + 2])
  soft[i] = ARGV[a + 3] == '1'
end
local e, now = prepare(asked, wins, margin)

local count, base, fits = {}, {}, {}
local allowed = 1
for i = 1, k do
  local c, b = 0, 0
  if e[i] then
    b = e[i][2] - e[i][3]
    c = e[i][5] - b
  end
  count[i], base[i] = c, b
  fits[i] = c + ns[i] <= maxes[i]
  if not fits[i] and not soft[i] then
    allowed = 0
  end
end

if record and allowed == 1 then
  for i = 1, k do
    if fits[i] and ns[i] > 0 then
      local log = KEYS[2 * i - 1]
      local c1 = 0
      if e[i] then
        c1 = e[i][5]
      end
      if c1 + ns[i] > REBASE then
        splice(log, 0, 0, tail(log, 0))
        c1, base[i] = count[i], 0
      end
      redis.call('ZADD', log, us(now), string.format('%016d:%d', c1 + ns[i], ns[i]))
      redis.call('PEXPIRE', log, math.ceil(wins[i] / 1000) + margin)
      count[i] = count[i] + ns[i]
    end
  end
end

local out = {allowed, now}
for i = 1, k do
  local c = count[i]
  local wait = 0
  local need = c + 1 - maxes[i]
  if need > c then
    -- A limit below one unit: nothing ever fits.
    wait = wins[i]
  elseif need > 0 then
    -- The need-th oldest unit must leave the window first.
    wait = unit_score(KEYS[2 * i - 1], base[i] + need, need - 1) + wins[i] - now
  end
  local f = 0
  if fits[i] then
    f = 1
  end
  out[#out + 1] = f
  out[#out + 1] = maxes[i] - c
  out[#out + 1] = wait
end
return out
