#!lua
-- rollstat: apply one instance's deltas to one shared rolling window, at
-- most once, then read and trim the window, atomically.
--
-- KEYS[1]: the window's hash; fields "<slot>:s" (sum) and "<slot>:c" (count)
-- per bucket, <slot> being the bucket's index on the epoch-aligned grid
-- (slot start / interval); "<slot>:x", "<count>;<version>;<min>;<max>", for
-- buckets of types with a range (the count of samples whose writers sent
-- it, a version bumped by each batch that changed the slot's quantile bins,
-- the smallest and largest value); and one field "@<instance>" per instance
-- that wrote: "<seq>:<slot>", the sequence number of the last batch of that
-- instance applied here and the slot it was sent in. The quantile bins of a
-- slot are the hash KEYS[1] .. ':q:' .. slot (the same hash tag, so the same
-- cluster slot), one field per bin ("p<key>", "n<key>", "z") holding its
-- count over every instance. A set's slot has "<slot>:u",
-- "<version>;<beyond>" (bumped by each batch that brought members; beyond
-- is 1 once the slot's members are past the exact limit), its members'
-- HyperLogLog KEYS[1] .. ':u:' .. slot (Redis's own, merged by PFMERGE)
-- and, while exact, the set of their 64-bit hashes KEYS[1] .. ':e:' ..
-- slot. The field "#u" caches the last distinct count read.
-- ARGV[1]: the instance; ARGV[2]: the slot being filled now; ARGV[3]: the
-- oldest slot still inside the window; ARGV[4]: the expiry (ms) after a
-- write; ARGV[5]: the number of batches; then per batch, in increasing
-- sequence order: its sequence number, its number of deltas n, and n deltas
-- (slot, delta of the sum, delta of the count, e, then e pairs: "m" and the
-- bucket's min, "M" and its max, or a bin's field and its count's change;
-- for a set "h" and a member's hash, "u" and a HyperLogLog of the
-- registers its new members raised, "H" and 1 when the bucket is past its
-- exact limit); then the number of slots whose bins the caller holds, and
-- per slot (slot, version); then 0 (not a set), 1 (a set whose current
-- slot counts) or 2 (a set that ignores it).
--
-- A batch whose sequence number is not above the one stored for the
-- instance was applied before (its answer was lost, and it is sent again):
-- it is skipped, so a batch is applied at most once (min and max would not
-- mind, counts would). Deltas of slots that left the window are skipped.
-- Then the fields of slots that left the window are deleted (and their bins),
-- and "@" fields older than two window lengths (their instance has nothing
-- in doubt that could still land). Returned: {fields, bins}: the bucket
-- fields as a flat list {field, value, ...}, and for each slot whose version
-- is not the one the caller holds {slot, bin, count, ...}, and for a set
-- {distinct members, 1 if exact}: the size of the union of the counted
-- slots' hash sets while none is beyond, else PFCOUNT of their
-- HyperLogLogs.
local key = KEYS[1]
local mine = '@' .. ARGV[1]
local current = tonumber(ARGV[2])
local oldest = tonumber(ARGV[3])
local batches = tonumber(ARGV[5])
local applied = 0
local last = redis.call('HGET', key, mine)
if last then
  applied = tonumber(string.match(last, '^(%d+):')) or 0
end
local wrote = false

-- Folds one delta's range and bins (e pairs from ARGV[at]) into the slot.
local function spread(slot, dcount, at, e)
  local x = redis.call('HGET', key, slot .. ':x')
  local count, version, lo, hi = 0, 0, nil, nil
  if x then
    local c, v, l, h = string.match(x, '^([^;]*);([^;]*);([^;]*);([^;]*)$')
    count, version, lo, hi = tonumber(c) or 0, tonumber(v) or 0, l, h
  end
  local bins = key .. ':q:' .. slot
  local changed = false
  for p = 0, e - 1 do
    local name, value = ARGV[at + 2 * p], ARGV[at + 2 * p + 1]
    if name == 'm' then
      local was = tonumber(lo or '')
      if was == nil or tonumber(value) < was then lo = value end
    elseif name == 'M' then
      local was = tonumber(hi or '')
      if was == nil or tonumber(value) > was then hi = value end
    else
      if redis.call('HINCRBY', bins, name, value) == 0 then
        redis.call('HDEL', bins, name)
      end
      changed = true
    end
  end
  if changed then
    version = version + 1
    redis.call('PEXPIRE', bins, ARGV[4])
  end
  count = count + tonumber(dcount)
  redis.call('HSET', key, slot .. ':x',
    string.format('%.17g;%d;%s;%s', count, version, lo or 'inf', hi or '-inf'))
end

-- Members past this many in a slot (the union of every instance's) are
-- counted by the HyperLogLog only: up to 512 integers Redis keeps a set
-- as an intset, 8 bytes a member (5 KB); past it as a hash table (64 KB
-- at 1,024).
local EXACT_LIMIT = 512

-- Folds one set delta's members (e pairs from ARGV[at]) into the slot.
local function members(slot, at, e)
  local field = slot .. ':u'
  local version, beyond = 0, 0
  local mark = redis.call('HGET', key, field)
  if mark then
    local v, b = string.match(mark, '^(%d+);(%d)$')
    version, beyond = tonumber(v) or 0, tonumber(b) or 0
  end
  local exact = key .. ':e:' .. slot
  local hashes = {}
  for p = 0, e - 1 do
    local name, value = ARGV[at + 2 * p], ARGV[at + 2 * p + 1]
    if name == 'h' then
      hashes[#hashes + 1] = value
    elseif name == 'u' then
      local regs = key .. ':u:' .. slot
      if redis.call('EXISTS', regs) == 0 then
        redis.call('SET', regs, value, 'PX', ARGV[4])
      else
        local t = key .. ':t'
        redis.call('SET', t, value)
        redis.call('PFMERGE', regs, t)
        redis.call('DEL', t)
        redis.call('PEXPIRE', regs, ARGV[4])
      end
    elseif name == 'H' then
      beyond = 1
    end
  end
  if beyond == 0 and #hashes > 0 then
    for j = 1, #hashes, 500 do
      redis.call('SADD', exact, unpack(hashes, j, math.min(#hashes, j + 499)))
    end
    if redis.call('SCARD', exact) > EXACT_LIMIT then
      beyond = 1
    else
      redis.call('PEXPIRE', exact, ARGV[4])
    end
  end
  if beyond == 1 then
    redis.call('DEL', exact)
  end
  redis.call('HSET', key, field, string.format('%d;%d', version + 1, beyond))
end

local i = 6
for _ = 1, batches do
  local seq = tonumber(ARGV[i])
  local n = tonumber(ARGV[i + 1])
  i = i + 2
  local apply = seq > applied
  for _ = 1, n do
    local slot, e = ARGV[i], tonumber(ARGV[i + 3])
    if apply and tonumber(slot) >= oldest then
      redis.call('HINCRBYFLOAT', key, slot .. ':s', ARGV[i + 1])
      redis.call('HINCRBYFLOAT', key, slot .. ':c', ARGV[i + 2])
      local first = ARGV[i + 4]
      if first == 'h' or first == 'u' or first == 'H' then
        members(slot, i + 4, e)
      elseif e > 0 then
        spread(slot, ARGV[i + 2], i + 4, e)
      end
    end
    i = i + 4 + 2 * e
  end
  if apply then
    applied = seq
    wrote = true
  end
end
local known = {}
local nknown = tonumber(ARGV[i]) or 0
for k = 0, nknown - 1 do
  known[ARGV[i + 1 + 2 * k]] = ARGV[i + 2 + 2 * k]
end
local distinct = tonumber(ARGV[i + 1 + 2 * nknown]) or 0
local upto = current
if distinct == 2 then
  upto = current - 1
end
if wrote then
  redis.call('HSET', key, mine, string.format('%d:%d', applied, current))
  redis.call('PEXPIRE', key, ARGV[4])
end
local span = current - oldest + 1
local all = redis.call('HGETALL', key)
local out = {}
local dead = {}
local changed = {}
local sets = {}
local cached = nil
for j = 1, #all, 2 do
  local f = all[j]
  if f == '#u' then
    cached = all[j + 1]
  elseif string.sub(f, 1, 1) == '@' then
    local at = tonumber(string.match(all[j + 1], ':(%d+)$'))
    if at == nil or at < oldest - span then
      dead[#dead + 1] = f
    end
  else
    local slot, which = string.match(f, '^(%d+):(.*)$')
    if slot == nil or tonumber(slot) < oldest then
      dead[#dead + 1] = f
      if which == 'x' then
        redis.call('DEL', key .. ':q:' .. slot)
      elseif which == 'u' then
        redis.call('DEL', key .. ':u:' .. slot, key .. ':e:' .. slot)
      end
    else
      out[#out + 1] = f
      out[#out + 1] = all[j + 1]
      if which == 'x' then
        local version = string.match(all[j + 1], '^[^;]*;([^;]*);')
        if known[slot] ~= version then
          changed[#changed + 1] = slot
        end
      elseif which == 'u' and tonumber(slot) <= upto then
        local v, b = string.match(all[j + 1], '^(%d+);(%d)$')
        sets[#sets + 1] = {slot, tonumber(v) or 0, b == '1'}
      end
    end
  end
end
for j = 1, #dead, 500 do
  redis.call('HDEL', key, unpack(dead, j, math.min(#dead, j + 499)))
end
local bins = {}
for _, slot in ipairs(changed) do
  local one = redis.call('HGETALL', key .. ':q:' .. slot)
  table.insert(one, 1, slot)
  bins[#bins + 1] = one
end
if distinct == 0 then
  return {out, bins, {}}
end

-- The distinct count of the counted slots, unless the cache holds it for
-- the same slots at the same versions (with the current slot ignored, the
-- counted ones change only when a bucket closes).
local versions, beyond = 0, false
for _, s in ipairs(sets) do
  versions = versions + s[2]
  beyond = beyond or s[3]
end
local tag = string.format('%d;%d;%d', oldest, upto, versions)
if cached then
  local t, n, x = string.match(cached, '^(%d+;%d+;%d+);(%d+);(%d)$')
  if t == tag then
    return {out, bins, {tonumber(n), tonumber(x)}}
  end
end
if #sets == 0 then
  return {out, bins, {0, 1}}
end
-- Folds the keys into the scratch key 500 at a time (a window of a few
-- thousand slots stays within Lua's argument limit), then counts it.
local function union(suffix, into)
  local t = key .. ':t'
  redis.call('DEL', t)
  for j = 1, #sets, 500 do
    local keys = {t}
    for k = j, math.min(#sets, j + 499) do
      keys[#keys + 1] = key .. suffix .. sets[k][1]
    end
    redis.call(into, unpack(keys))
  end
end
local n, exact
if not beyond then
  union(':e:', 'SUNIONSTORE')
  n, exact = redis.call('SCARD', key .. ':t'), 1
else
  union(':u:', 'PFMERGE')
  n, exact = redis.call('PFCOUNT', key .. ':t'), 0
end
redis.call('DEL', key .. ':t')
redis.call('HSET', key, '#u', string.format('%s;%d;%d', tag, n, exact))
return {out, bins, {n, exact}}
