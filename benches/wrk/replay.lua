-- One intent, asked for again and again: the same ~1 KiB send_email every time.
wrk.method = "POST"
wrk.headers["content-type"] = "application/json"
wrk.headers["x-session-id"] = "load"
wrk.body = '{"to":"ann@example.com","subject":"the same report","body":"' .. string.rep("x", 900) .. '"}'
wrk.path = "/tools/send_email"
