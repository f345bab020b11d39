-- One order, asked for again and again (examples/orders): the same ~1 KiB item every time.
wrk.method = "POST"
wrk.headers["content-type"] = "application/json"
wrk.headers["x-session-id"] = "load"
wrk.body = '{"item":"the same tea ' .. string.rep("x", 900) .. '","delay_ms":0}'
wrk.path = "/orders"
