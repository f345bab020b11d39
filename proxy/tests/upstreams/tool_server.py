#!/usr/bin/env python3
"""A small HTTP tool server on the standard library, for the proxy's tests.

    tool_server.py [PORT]      (0 or nothing: a free port)
    tool_server.py PORT CERT KEY [CLIENT_CA]   (the same over TLS, with this certificate and
                                                key; with CLIENT_CA, clients must show a
                                                certificate it signed)

Prints "listening on PORT" once it accepts connections. Every POST /tools/NAME counts one
execution of NAME (GET /stats returns the counts); each e-mail sent is counted by its address
too (GET /sent returns those counts). The tools:

  send_email   200 {"status": "sent", "message_id": "msg_N"}; waits `delay_ms` first, and
               counts once done
  reject       400, the tool's own refusal
  flaky        503 the first time, 200 after
  broken       500 every time
  hang         reads the request, then never answers within the test
  reset        reads the request, then closes the connection without an answer
  truncate     starts a 200 answer of 100 bytes, sends 10, then closes the connection
  stall        starts a 200 answer of 100 bytes, sends 10, then waits 30 s
  stream       an SSE answer: event 1, then event 2 once GET /sse/seen was called
  echo_headers 200 {"headers": {...}}: the request's headers, each name with its values; the
               request's x-request-id is said back as a header of the answer, as many
               servers do

GET /events is an SSE stream like `stream`; GET /headers echoes the request's headers and
the port the request came from, with a hop-by-hop header of its own; anything else is 404.
"""

import json
import socket
import ssl
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

COUNTS = {}
LOCK = threading.Lock()
SENT = {}
SEEN = threading.Event()


def bump(name):
    with LOCK:
        COUNTS[name] = COUNTS.get(name, 0) + 1
        return COUNTS[name]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def read_body(self):
        length = int(self.headers.get("content-length") or 0)
        return self.rfile.read(length) if length else b""

    def answer(self, status, document, headers=()):
        body = json.dumps(document).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        for name, value in headers:
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def partial_answer(self):
        """The start of a 200 answer of 100 bytes: its head and 10 bytes."""
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", "100")
        self.end_headers()
        self.wfile.write(b'{"charged"')
        self.wfile.flush()

    def sse(self):
        """Event 1, then event 2 only after the client said it has seen event 1."""
        SEEN.clear()
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()

        def chunk(data):
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()

        chunk(b"data: one\n\n")
        held = SEEN.wait(timeout=10)
        chunk(b"data: two\n\n" if held else b"data: two-after-timeout\n\n")
        chunk(b"")

    def seen_headers(self):
        headers = {}
        for name, value in self.headers.items():
            headers.setdefault(name.lower(), []).append(value)
        return headers

    def do_GET(self):
        if self.path == "/stats":
            with LOCK:
                return self.answer(200, dict(COUNTS))
        if self.path == "/sent":
            with LOCK:
                return self.answer(200, dict(SENT))
        if self.path == "/sse/seen":
            SEEN.set()
            return self.answer(200, {"seen": True})
        if self.path == "/events":
            return self.sse()
        if self.path.startswith("/headers"):
            return self.answer(
                200,
                {"headers": self.seen_headers(), "path": self.path, "peer_port": self.client_address[1]},
                headers=[("connection", "x-upstream-hop"), ("x-upstream-hop", "1"), ("x-kept", "1")],
            )
        self.answer(404, {"error": "no such path"})

    def do_POST(self):
        body = self.read_body()
        if not self.path.startswith("/tools/"):
            return self.answer(404, {"error": "no such path"})
        name = self.path[len("/tools/"):].split("?")[0]
        try:
            args = json.loads(body or b"{}")
        except ValueError:
            args = {}
        if name == "send_email":
            # Sent (counted) at the end, as a real e-mail would be.
            time.sleep(args.get("delay_ms", 0) / 1000)
            n = bump(name)
            with LOCK:
                to = str(args.get("to"))
                SENT[to] = SENT.get(to, 0) + 1
            return self.answer(200, {"status": "sent", "message_id": f"msg_{n}", "to": args.get("to")})
        n = bump(name)
        if name == "stall":
            self.partial_answer()
            time.sleep(30)
            return
        if name == "reject":
            return self.answer(400, {"error": "the address is not allowed"})
        if name == "broken":
            return self.answer(500, {"error": "the mail provider is down"})
        if name == "flaky":
            if n == 1:
                return self.answer(503, {"error": "try later"})
            return self.answer(200, {"status": "done", "attempt": n})
        if name == "hang":
            time.sleep(args.get("delay_ms", 30000) / 1000)
            return self.answer(200, {"status": "late"})
        if name == "reset":
            self.connection.shutdown(socket.SHUT_RDWR)
            self.close_connection = True
            return
        if name == "truncate":
            self.partial_answer()
            self.connection.shutdown(socket.SHUT_RDWR)
            self.close_connection = True
            return
        if name == "stream":
            return self.sse()
        if name == "echo_headers":
            said = self.headers.get("x-request-id")
            back = [("x-request-id", said)] if said else []
            return self.answer(200, {"headers": self.seen_headers()}, headers=back)
        self.answer(404, {"error": f"no tool {name}"})


def main():
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    if len(sys.argv) > 3:
        # tool_server.py PORT CERT KEY: the same server over TLS.
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(sys.argv[2], sys.argv[3])
        if len(sys.argv) > 4:
            # ... CLIENT_CA: and every client shows a certificate this authority signed.
            context.load_verify_locations(sys.argv[4])
            context.verify_mode = ssl.CERT_REQUIRED
        server.socket = context.wrap_socket(server.socket, server_side=True)
    print(f"listening on {server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
