-- Every request a new intent: a ~1 KiB send_email whose subject carries a per-thread counter,
-- with an idempotency key of its own (the peer needs one; the others ignore it).
local pad = string.rep("x", 900)
local nonce = tostring(os.time())
local threads = 0

function setup(thread)
  threads = threads + 1
  thread:set("tid", threads)
end

local counter = 0
wrk.method = "POST"

function request()
  counter = counter + 1
  local id = nonce .. "-" .. tostring(tid) .. "-" .. counter
  local body = '{"to":"ann@example.com","subject":"report ' .. id .. '","body":"' .. pad .. '"}'
  -- The headers given here replace wrk.headers (all but Host), so all of them are named.
  local headers = {
    ["content-type"] = "application/json",
    ["x-session-id"] = "load",
    ["idempotency-key"] = "k-" .. id,
  }
  return wrk.format(nil, "/tools/send_email", headers, body)
end
