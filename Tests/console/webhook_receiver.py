"""The webhook receiver of the browser suite: answers 204 to every POST,
except 500 to those about subscribers whose id starts with `console-unlucky`
(reminders and changes carry `subscriberId`), so the console has delivery
errors to show. `POST /heal` with `{"subscriberId": ID}` makes it answer 204
for that exact id from then on, as a receiver fixed by its owner would.
Prints the port it listens on (loopback), then serves until stopped."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

healed = set()
lock = threading.Lock()


class Receiver(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            subscriber = str(json.loads(body).get("subscriberId", ""))
        except (ValueError, AttributeError):
            subscriber = ""
        if self.path == "/heal":
            with lock:
                healed.add(subscriber)
            status = 204
        else:
            with lock:
                refused = subscriber.startswith("console-unlucky") and subscriber not in healed
            status = 500 if refused else 204
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *arguments):
        pass


if __name__ == "__main__":
    server = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    print(server.server_address[1], flush=True)
    server.serve_forever()
