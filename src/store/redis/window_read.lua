-- rollstat: read and trim one shared rolling window.
--
-- KEYS[1]: the window's hash; fields "<slot>:s" (sum) and "<slot>:c" (count)
-- per bucket, <slot> being the bucket's index on the epoch-aligned grid
-- (slot start / interval), written by every instance with HINCRBYFLOAT.
-- ARGV[1]: the oldest slot still inside the window.
--
-- Deletes the fields of older slots and returns the others as a flat list
-- {field, value, field, value, ...}, atomically.
local oldest = tonumber(ARGV[1])
local all = redis.call('HGETALL', KEYS[1])
local out = {}
local dead = {}
for i = 1, #all, 2 do
  local f = all[i]
  local slot = tonumber(string.match(f, '^(%d+):'))
  if slot == nil or slot < oldest then
    dead[#dead + 1] = f
  else
    out[#out + 1] = f
    out[#out + 1] = all[i + 1]
  end
end
for i = 1, #dead, 500 do
  redis.call('HDEL', KEYS[1], unpack(dead, i, math.min(#dead, i + 499)))
end
return out
