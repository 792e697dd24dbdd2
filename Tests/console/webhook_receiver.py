"""The reminder webhook receiver of the browser suite: answers 204 to every
reminder, except 500 to those of subscribers whose id starts with
`console-unlucky`, so the console has a delivery error to show. Prints the
port it listens on (loopback), then serves until stopped."""

import json
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Receiver(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            subscriber = str(json.loads(body).get("subscriberId", ""))
        except (ValueError, AttributeError):
            subscriber = ""
        self.send_response(500 if subscriber.startswith("console-unlucky") else 204)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *arguments):
        pass


if __name__ == "__main__":
    server = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    print(server.server_address[1], flush=True)
    server.serve_forever()
