-- Every request a new intent: a ~1 KiB send_email whose subject carries a per-thread counter.
local pad = string.rep("x", 900)
local nonce = tostring(os.time())
local threads = 0

function setup(thread)
  threads = threads + 1
  thread:set("tid", threads)
end

local counter = 0
wrk.method = "POST"
wrk.headers["content-type"] = "application/json"
wrk.headers["x-session-id"] = "load"

function request()
  counter = counter + 1
  local body = '{"to":"ann@example.com","subject":"report ' .. nonce .. "-" .. tostring(tid) ..
    "-" .. counter .. '","body":"' .. pad .. '"}'
  return wrk.format(nil, "/tools/send_email", nil, body)
end
