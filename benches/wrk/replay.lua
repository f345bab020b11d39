-- One intent, asked for again and again: the same ~1 KiB send_email every time, or with
-- WRK_ORDERS=1 the same ~1 KiB order of examples/orders.
wrk.method = "POST"
wrk.headers["content-type"] = "application/json"
wrk.headers["x-session-id"] = "load"
if os.getenv("WRK_ORDERS") == "1" then
  wrk.body = '{"item":"the same tea ' .. string.rep("x", 900) .. '","delay_ms":0}'
  wrk.path = "/orders"
else
  wrk.body = '{"to":"ann@example.com","subject":"the same report","body":"' .. string.rep("x", 900) .. '"}'
  wrk.path = "/tools/send_email"
end
