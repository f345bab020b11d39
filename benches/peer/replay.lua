-- One intent, repeated: the same ~1 KiB send_email and the same idempotency key every time.
local pad = string.rep("x", 900)
wrk.method = "POST"
wrk.path = "/tools/send_email"
wrk.headers["content-type"] = "application/json"
wrk.headers["x-session-id"] = "load"
wrk.headers["idempotency-key"] = "k-replay"
wrk.body = '{"to":"ann@example.com","subject":"report","body":"' .. pad .. '"}'
