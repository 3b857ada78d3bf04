-- wrk script: POST /api/v1/limits/api/acquire with keys spread over 10,000
-- users, so decisions hit the keyed limiter the way an API gateway would.
local counter = 0
request = function()
  counter = counter + 1
  local key = "user" .. (counter % 10000)
  return wrk.format("POST", "/api/v1/limits/api/acquire?key=" .. key, nil, "")
end
