"""An MCP server's `tools/call` answer as the relay benchmark needs it: every POST is answered
as an event stream of PROGRESS progress notifications, then the call's result, as a server of
the handshake era writes them. It reads no session and validates nothing: what is measured is
the proxy in front of it.

    python3 benches/mcp_progress_upstream.py PORT PROGRESS
"""

import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    progress = 0

    def log_message(self, *args):
        pass

    def do_POST(self):
        message = json.loads(self.rfile.read(int(self.headers.get("content-length", "0"))))
        events = []
        token = message.get("params", {}).get("_meta", {}).get("progressToken", "load")
        for step in range(self.progress):
            note = {
                "jsonrpc": "2.0",
                "method": "notifications/progress",
                "params": {"progressToken": token, "progress": step + 1, "total": self.progress},
            }
            events.append(note)
        result = {
            "jsonrpc": "2.0",
            "id": message.get("id"),
            "result": {"content": [{"type": "text", "text": "sent"}], "isError": False},
        }
        events.append(result)
        body = "".join(f"event: message\ndata: {json.dumps(e)}\n\n" for e in events).encode()
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def main():
    port, progress = int(sys.argv[1]), int(sys.argv[2])
    Handler.progress = progress
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    print(f"listening on 127.0.0.1:{port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
