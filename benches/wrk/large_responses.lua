-- Every request a new intent whose response is large: create_record echoes a ~60 KiB body.
local pad = string.rep("y", 60 * 1024)
local nonce = tostring(os.time())
local counter = 0
wrk.method = "POST"
wrk.headers["content-type"] = "application/json"
wrk.headers["x-session-id"] = "load"

function request()
  counter = counter + 1
  local body = '{"n":"' .. nonce .. "-" .. counter .. '","pad":"' .. pad .. '"}'
  return wrk.format(nil, "/tools/create_record", nil, body)
end
