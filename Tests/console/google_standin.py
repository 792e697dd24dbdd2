"""A stand-in for Google on loopback for the console's browser suite.

The service under test is configured for Google Play against it: the
service account's token endpoint hands out an access token, and the Play
Developer API answers purchases.subscriptionsv2.get for the purchases
listed below (shaped as Google documents SubscriptionPurchaseV2), and
acknowledges. Anything else is Google's 404. Prints the port it listens on.

https://developers.google.com/android-publisher/api-ref/rest/v3/purchases.subscriptionsv2
"""

import http.server
import json
import re
import sys
from datetime import datetime, timedelta, timezone

NOW = datetime.now(timezone.utc).replace(microsecond=0)


def iso(instant):
    return instant.strftime("%Y-%m-%dT%H:%M:%S.000Z")


def subscription(state, subscriber, order, started, expires, acknowledged):
    """A pro_monthly:monthly SubscriptionPurchaseV2 as Google shapes it."""
    return {
        "kind": "androidpublisher#subscriptionPurchaseV2",
        "regionCode": "US",
        "startTime": iso(started),
        "subscriptionState": state,
        "latestOrderId": order,
        "acknowledgementState": "ACKNOWLEDGEMENT_STATE_ACKNOWLEDGED" if acknowledged else "ACKNOWLEDGEMENT_STATE_PENDING",
        "externalAccountIdentifiers": {"obfuscatedExternalAccountId": subscriber},
        "lineItems": [{
            "productId": "pro_monthly",
            "expiryTime": iso(expires),
            "autoRenewingPlan": {"autoRenewEnabled": True},
            "offerDetails": {"basePlanId": "monthly"},
            "latestSuccessfulOrderId": order,
        }],
    }


# purchase token -> SubscriptionPurchaseV2
SUBSCRIPTIONS = {
    "console-play-token-0001": subscription(
        "SUBSCRIPTION_STATE_ACTIVE", "console-play", "GPA.3383-0411-6412-45078",
        started=NOW - timedelta(days=2), expires=NOW + timedelta(days=28), acknowledged=False),
    # Billing failed after the grace period: on hold since yesterday.
    "console-play-token-0002": subscription(
        "SUBSCRIPTION_STATE_ON_HOLD", "console-play-held", "GPA.3383-0411-6412-45079..1",
        started=NOW - timedelta(days=40), expires=NOW - timedelta(days=1), acknowledged=True),
}

SUBSCRIPTION_PATH = re.compile(r"^/androidpublisher/v3/applications/[^/]+/purchases/subscriptionsv2/tokens/([^/?]+)$")


class Google(http.server.BaseHTTPRequestHandler):
    def answer(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        path = self.path.split("?")[0]
        match = SUBSCRIPTION_PATH.match(path)
        if path == "/token":
            status, body = 200, {"access_token": "ya29.console", "expires_in": 3599, "token_type": "Bearer"}
        elif match and match.group(1) in SUBSCRIPTIONS:
            status, body = 200, SUBSCRIPTIONS[match.group(1)]
        elif path.endswith(":acknowledge"):
            status, body = 200, {}
        else:
            status, body = 404, {"error": {"code": 404, "message": "Not found.", "status": "NOT_FOUND"}}
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = answer

    def log_message(self, *args):
        pass


class Server(http.server.ThreadingHTTPServer):
    request_queue_size = 64
    daemon_threads = True


server = Server(("127.0.0.1", 0), Google)
print(server.server_address[1], flush=True)
server.serve_forever()
