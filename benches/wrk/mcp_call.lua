-- Every request a new MCP tools/call of the handshake era (a new intent), in one session.
local nonce = tostring(os.time())
local threads = 0

function setup(thread)
  threads = threads + 1
  thread:set("tid", threads)
end

local counter = 0
wrk.method = "POST"
wrk.headers["content-type"] = "application/json"
wrk.headers["accept"] = "application/json, text/event-stream"
wrk.headers["mcp-session-id"] = "load"
wrk.headers["mcp-protocol-version"] = "2025-11-25"

function request()
  counter = counter + 1
  local unique = nonce .. "-" .. tostring(tid) .. "-" .. counter
  local body = '{"jsonrpc":"2.0","id":' .. counter .. ',"method":"tools/call","params":{"name":"send_email","arguments":{"to":"ann@example.com","subject":"report ' .. unique .. '"},"_meta":{"progressToken":' .. counter .. '}}}'
  return wrk.format(nil, "/mcp", nil, body)
end
