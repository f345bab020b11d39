-- Every request a new order (examples/orders): a ~1 KiB item that carries a per-thread counter.
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
  local body = '{"item":"tea ' .. nonce .. "-" .. tostring(tid) .. "-" .. counter .. " " .. pad ..
    '","delay_ms":0}'
  return wrk.format(nil, "/orders", nil, body)
end
