#!lua
-- rollstat: the sliding log's storage, the first part of sliding_log.lua and
-- sliding_logs.lua (each script is this file followed by its own part).
--
-- KEYS: per log i, the log KEYS[2i-1] and its late set KEYS[2i].
--
-- The log is a sorted set with ONE member per admitted request, whatever its
-- weight. Scores are microseconds since the Unix epoch (exact in a Lua/Redis
-- double up to 2^53 us, the year 2255). A member is `<cum>:<weight>`: cum is
-- the running total of admitted weight on this set up to and including this
-- request, zero-padded to 16 digits so that members of equal score sort by
-- cum. Time never goes backwards on a log (below), so cum grows with the
-- score: the weight inside the window, after trimming by score, is
-- newest.cum - oldest.cum + oldest.weight, and the k-th oldest unit of weight
-- lies in the first member whose cum reaches oldest.cum - oldest.weight + k
-- (a binary search by rank). The running total starts again from 0 when a
-- set empties (Redis deletes an empty set), and is renumbered from 0 in the
-- rare case it would pass 2^52. cum is unique on a set, so it is the member's
-- identity. Cost of a decision: O(rules * log(members)), plus the members
-- that expire (each removed once), whatever the weight.
--
-- The late set holds write-backs (a local fallback's admissions during an
-- outage, sent with plain ZADDs at their own, possibly older, times), one
-- member `<weight>:<id>` each. They are merged into the log here before any
-- decision: the log's members after the earliest late one are renumbered
-- (once per write-back, O(those members + late ones)).
--
-- Members of an older rollstat (`<us>-<instance>-<seq>-<i>`, one per unit)
-- are read as weight 1: a set whose oldest member is of the old format is
-- renumbered whole, one whose newest is has its old-format tail renumbered
-- (each old member is converted once). Old-format members an older
-- rollstat's write-back put in the middle of a new log are not counted and
-- leave within one window.

local REBASE = 4503599627370496 -- 2^52

local function parse(m)
  local c, w = string.match(m, '^(%d+):(%d+)$')
  if c then
    return tonumber(c), tonumber(w)
  end
  return nil, nil
end

local function us(x)
  return string.format('%d', x)
end

-- Score, cum and weight of the member of rank i (cum nil: old format).
local function at(key, i)
  local r = redis.call('ZRANGE', key, i, i, 'WITHSCORES')
  if not r[1] then
    return nil, nil, nil
  end
  local c, w = parse(r[1])
  return tonumber(r[2]), c, w
end

-- {score, weight} of the members from rank p on (old format: weight 1).
local function tail(key, p)
  local r = redis.call('ZRANGE', key, p, -1, 'WITHSCORES')
  local out = {}
  for j = 1, #r, 2 do
    local _, w = parse(r[j])
    out[#out + 1] = {tonumber(r[j + 1]), w or 1}
  end
  return out
end

-- Replaces the members of rank p on by `entries` ({score, weight}, in
-- order), their running totals continuing from `base`.
local function splice(key, p, base, entries)
  redis.call('ZREMRANGEBYRANK', key, p, -1)
  local batch = {}
  for _, e in ipairs(entries) do
    base = base + e[2]
    batch[#batch + 1] = us(e[1])
    batch[#batch + 1] = string.format('%016d:%d', base, e[2])
    if #batch >= 1000 then
      redis.call('ZADD', key, unpack(batch))
      batch = {}
    end
  end
  if #batch > 0 then
    redis.call('ZADD', key, unpack(batch))
  end
end

-- The members from rank p on, with the running total before them (from
-- rank 0 if the member before p is not of the current format).
local function from(key, p)
  if p > 0 then
    local _, c = at(key, p - 1)
    if c then
      return p, c, tail(key, p)
    end
  end
  return 0, 0, tail(key, 0)
end

-- The oldest and the newest member: {score0, cum0, weight0, score1, cum1}
-- (a cum is nil for a member of the old format), or nil for an empty log.
local function ends(key)
  local s0, c0, w0 = at(key, 0)
  if s0 == nil then
    return nil
  end
  local s1, c1 = at(key, -1)
  return {s0, c0, w0, s1, c1}
end

-- Converts old-format members at either end (see the header); returns the
-- log's ends after that.
local function normalize(key)
  local e = ends(key)
  if e == nil then
    return nil
  end
  if e[2] == nil then
    splice(key, 0, 0, tail(key, 0))
    return ends(key)
  end
  if e[5] then
    return e
  end
  local p = redis.call('ZCARD', key) - 1
  while p > 1 do
    local _, cp = at(key, p - 1)
    if cp then
      break
    end
    p = p - 1
  end
  local q, base, rest = from(key, p)
  splice(key, q, base, rest)
  return ends(key)
end

-- Merges the late set's entries still inside the window of `t` into the log.
local function merge(log, late, t, win, margin)
  local r = redis.call('ZRANGE', late, 0, -1, 'WITHSCORES')
  if not r[1] then
    return false
  end
  redis.call('DEL', late)
  local add = {}
  for j = 1, #r, 2 do
    local s = tonumber(r[j + 1])
    local w = tonumber(string.match(r[j], '^(%d+):'))
    if w and w > 0 and s > t - win then
      add[#add + 1] = {s, w}
    end
  end
  if #add == 0 then
    return false
  end
  -- Members of the log at or before the earliest late one keep their place;
  -- the later ones and the late ones are merged by score (log first on ties).
  local p = redis.call('ZCOUNT', log, '-inf', us(add[1][1]))
  local q, base, old = from(log, p)
  local merged = {}
  local a, b = 1, 1
  while a <= #old or b <= #add do
    if b > #add or (a <= #old and old[a][1] <= add[b][1]) then
      merged[#merged + 1] = old[a]
      a = a + 1
    else
      merged[#merged + 1] = add[b]
      b = b + 1
    end
  end
  splice(log, q, base, merged)
  redis.call('PEXPIRE', log, math.ceil(win / 1000) + margin)
  return true
end

-- Trims each log to its window at `asked`, converts and merges (above), and
-- reads its ends once (each read is a call into Redis); `wins[i]` is the
-- window of the log KEYS[2i-1], whose late set is KEYS[2i]. Returns the
-- ends of every log and the `now` used: `asked`, or the newest member's
-- time if a log is ahead of it (time never goes backwards on a log), with
-- every log trimmed again to that `now`.
local function prepare(asked, wins, margin)
  local e = {}
  for i = 1, #wins do
    local log = KEYS[2 * i - 1]
    -- Trimmed first at the caller's `now`: what leaves here would leave below
    -- anyway (the `now` used is never older), so the ends read next are
    -- final unless a log's newest member is ahead of the caller's clock.
    redis.call('ZREMRANGEBYSCORE', log, '-inf', us(asked - wins[i]))
    local ei = normalize(log)
    local t = asked
    if ei and ei[4] > t then
      t = ei[4]
    end
    if merge(log, KEYS[2 * i], t, wins[i], margin) then
      ei = ends(log)
    end
    e[i] = ei
  end
  local now = asked
  for i = 1, #wins do
    if e[i] and e[i][4] > now then
      now = e[i][4]
    end
  end
  for i = 1, #wins do
    local log = KEYS[2 * i - 1]
    local ei = e[i]
    if now > asked and ei and redis.call('ZREMRANGEBYSCORE', log, '-inf', us(now - wins[i])) > 0 then
      -- Trimming removes the oldest members only: the newest stays unless
      -- the log is now empty.
      local s0, c0, w0 = at(log, 0)
      if s0 then
        e[i] = {s0, c0, w0, ei[4], ei[5]}
      else
        e[i] = nil
      end
    end
  end
  return e, now
end

-- The score of the member holding the unit whose running total is `target`
-- (the first member whose cum reaches it). Every member weighs at least 1,
-- so it is at rank j or before, j = its rank if every member weighed 1: one
-- read when they do (the common case), else a binary search by rank below j.
local function unit_score(log, target, j)
  local lo, hi = 0, j
  local r = redis.call('ZRANGE', log, math.max(j - 1, 0), j, 'WITHSCORES')
  if j > 0 and r[3] then
    local cp = parse(r[1])
    if cp and cp < target then
      return tonumber(r[4])
    end
    hi = j - 1
  elseif j == 0 and r[1] then
    return tonumber(r[2])
  else
    hi = math.min(j, redis.call('ZCARD', log) - 1)
  end
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    local _, cm = at(log, mid)
    if cm and cm >= target then
      hi = mid
    else
      lo = mid + 1
    end
  end
  return (at(log, lo))
end
