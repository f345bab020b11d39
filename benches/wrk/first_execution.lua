-- Every request a new intent: a ~1 KiB send_email whose subject carries a per-thread counter,
-- or with WRK_ORDERS=1 a ~1 KiB order of examples/orders whose item carries it.
local pad = string.rep("x", 900)
local nonce = tostring(os.time())
local orders = os.getenv("WRK_ORDERS") == "1"
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
  local unique = nonce .. "-" .. tostring(tid) .. "-" .. counter
  if orders then
    local body = '{"item":"tea ' .. unique .. " " .. pad .. '","delay_ms":0}'
    return wrk.format(nil, "/orders", nil, body)
  end
  local body = '{"to":"ann@example.com","subject":"report ' .. unique .. '","body":"' .. pad .. '"}'
  return wrk.format(nil, "/tools/send_email", nil, body)
end
