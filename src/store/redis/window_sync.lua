#!lua
-- rollstat: apply one instance's deltas to one shared rolling window, at
-- most once, then read and trim the window, atomically.
--
-- KEYS[1]: the window's hash; fields "<slot>:s" (sum) and "<slot>:c" (count)
-- per bucket, <slot> being the bucket's index on the epoch-aligned grid
-- (slot start / interval); and one field "@<instance>" per instance that
-- wrote: "<seq>:<slot>", the sequence number of the last batch of that
-- instance applied here and the slot it was sent in.
-- ARGV[1]: the instance; ARGV[2]: the slot being filled now; ARGV[3]: the
-- oldest slot still inside the window; ARGV[4]: the expiry (ms) after a
-- write; ARGV[5]: the number of batches; then per batch, in increasing
-- sequence order: its sequence number, its number of deltas n, and n
-- triples (slot, delta of the sum, delta of the count).
--
-- A batch whose sequence number is not above the one stored for the
-- instance was applied before (its answer was lost, and it is sent again):
-- it is skipped, so a batch is applied at most once. Deltas of slots that
-- left the window are skipped. Then the fields of slots that left the window
-- are deleted, and "@" fields older than two window lengths (their instance
-- has nothing in doubt that could still land), and the bucket fields are
-- returned as a flat list {field, value, ...}.
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
local i = 6
for _ = 1, batches do
  local seq = tonumber(ARGV[i])
  local n = tonumber(ARGV[i + 1])
  i = i + 2
  if seq > applied then
    for d = 0, n - 1 do
      local at = i + 3 * d
      local slot = ARGV[at]
      if tonumber(slot) >= oldest then
        redis.call('HINCRBYFLOAT', key, slot .. ':s', ARGV[at + 1])
        redis.call('HINCRBYFLOAT', key, slot .. ':c', ARGV[at + 2])
      end
    end
    applied = seq
    wrote = true
  end
  i = i + 3 * n
end
if wrote then
  redis.call('HSET', key, mine, string.format('%d:%d', applied, current))
  redis.call('PEXPIRE', key, ARGV[4])
end
local span = current - oldest + 1
local all = redis.call('HGETALL', key)
local out = {}
local dead = {}
for j = 1, #all, 2 do
  local f = all[j]
  if string.sub(f, 1, 1) == '@' then
    local at = tonumber(string.match(all[j + 1], ':(%d+)$'))
    if at == nil or at < oldest - span then
      dead[#dead + 1] = f
    end
  else
    local slot = tonumber(string.match(f, '^(%d+):'))
    if slot == nil or slot < oldest then
      dead[#dead + 1] = f
    else
      out[#out + 1] = f
      out[#out + 1] = all[j + 1]
    end
  end
end
for j = 1, #dead, 500 do
  redis.call('HDEL', key, unpack(dead, j, math.min(#dead, j + 499)))
end
return out
