"""Fixtures of the console's browser suite.

The service under test is started by scripts/console-test, which passes its
address and keys in the environment:

    CONSOLE_URL            http://127.0.0.1:PORT
    CONSOLE_SUPPORT_KEY    a support key
    CONSOLE_ADMIN_KEY      an admin key
    CONSOLE_INGEST_KEY     an ingest key (loads the facts; refused by the console)
    CONSOLE_SCREENSHOTS    where screenshots go (.build/console-screenshots)

The facts are loaded over HTTP, as an app's backend would send them.
"""

import json
import os
import time
import urllib.error
import urllib.parse
import urllib.request
from datetime import datetime, timedelta, timezone

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import WebDriverWait

BASE_URL = os.environ.get("CONSOLE_URL", "http://127.0.0.1:8080")
SUPPORT_KEY = os.environ.get("CONSOLE_SUPPORT_KEY", "dev-support-key-local")
ADMIN_KEY = os.environ.get("CONSOLE_ADMIN_KEY", "dev-admin-key-local")
INGEST_KEY = os.environ.get("CONSOLE_INGEST_KEY", "dev-ingest-key-local")
SCREENSHOTS = os.environ.get("CONSOLE_SCREENSHOTS", ".build/console-screenshots")

# Hostile text, stored as identifiers and free text: it must show as text.
XSS = "<script>alert(1)</script>"
XSS_SUBSCRIBER = "xss-" + XSS
XSS_DEVICE = XSS + '<img src=x onerror="alert(2)">'
XSS_REASON = '<img src=x onerror="alert(3)"><b>refund</b>'

NOW = datetime.now(timezone.utc).replace(microsecond=0)

# The name typed at sign-in: the console sends it as Subledger-Actor.
ACTOR = "Console Tester"


def iso(instant):
    return instant.strftime("%Y-%m-%dT%H:%M:%SZ")


def days(count):
    return NOW + timedelta(days=count)


def api(method, path, body=None, key=INGEST_KEY):
    """One request; answers (status, JSON body)."""
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(BASE_URL + path, data=data, method=method)
    request.add_header("Authorization", f"Bearer {key}")
    if data is not None:
        request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null")


def record(subscriber, fact):
    status, body = api("POST", f"/v1/subscribers/{urllib.parse.quote(subscriber, safe='')}/events", fact)
    assert status in (200, 201), f"{subscriber} {fact}: {status} {body}"
    return body


class Facts:
    """What was loaded, for the tests to look for."""

    subscriber = "console-alice"
    pass_transaction = "console-pass-2"
    monthly_original = "console-monthly-1"
    coverage_end = days(50)  # two stacked 30-day passes: now-10d → now+20d → now+50d
    delivered = "console-bob"
    undelivered = "console-unlucky"
    xss_subscriber = XSS_SUBSCRIBER
    xss_device = XSS_DEVICE
    xss_reason = XSS_REASON
    family = "console-family"


@pytest.fixture(scope="session")
def facts():
    alice = Facts.subscriber
    # An auto-renewable: bought, renewed, the renewal refunded.
    record(alice, {"type": "purchase", "transactionId": "console-monthly-1", "productId": "com.example.pro.monthly",
                   "purchaseDate": iso(days(-90)), "expiresDate": iso(days(-60)), "autoRenew": True,
                   "deviceId": "alices-iphone"})
    record(alice, {"type": "renewal", "transactionId": "console-monthly-2", "originalTransactionId": "console-monthly-1",
                   "productId": "com.example.pro.monthly", "purchaseDate": iso(days(-60)), "expiresDate": iso(days(-30))})
    record(alice, {"type": "refund", "transactionId": "console-monthly-2", "revocationDate": iso(days(-45)),
                   "reason": "bought by mistake"})
    # Two 30-day passes, the second stacked after the first.
    record(alice, {"type": "purchase", "transactionId": "console-pass-1", "productId": "com.example.pass.30d",
                   "purchaseDate": iso(days(-10)), "deviceId": "alices-ipad"})
    record(alice, {"type": "purchase", "transactionId": "console-pass-2", "productId": "com.example.pass.30d",
                   "purchaseDate": iso(days(-5))})
    record(alice, {"type": "purchase", "transactionId": "console-coins-1", "productId": "com.example.coins.100",
                   "purchaseDate": iso(days(-3)), "quantity": 2})
    # A StoreKit test purchase: history shows it marked Sandbox.
    record(alice, {"type": "purchase", "transactionId": "console-sandbox-1", "productId": "com.example.coins.100",
                   "purchaseDate": iso(days(-2)), "environment": "Sandbox"})

    # Family Sharing with an introductory offer, then a prorated refund.
    record(Facts.family, {"type": "purchase", "transactionId": "console-family-1", "productId": "com.example.level2",
                          "purchaseDate": iso(days(-20)), "ownershipType": "FAMILY_SHARED",
                          "offer": {"type": "introductory", "discount": "pay_up_front"}, "price": "2.99", "currency": "EUR",
                          "storefront": "DEU"})
    record(Facts.family, {"type": "refund", "transactionId": "console-family-1", "revocationDate": iso(days(-1)),
                          "revocationType": "REFUND_PRORATED", "revocationPercentage": 25000, "revocationReason": 1})

    # The hostile subscriber.
    record(XSS_SUBSCRIBER, {"type": "purchase", "transactionId": "console-xss-1", "productId": "com.example.pass.30d",
                            "purchaseDate": iso(days(-1)), "deviceId": XSS_DEVICE})
    record(XSS_SUBSCRIBER, {"type": "purchase", "transactionId": "console-xss-2", "productId": "com.example.level2",
                            "purchaseDate": iso(days(-1))})
    record(XSS_SUBSCRIBER, {"type": "refund", "transactionId": "console-xss-2", "revocationDate": iso(NOW),
                            "reason": XSS_REASON})

    # Two passes ending a few seconds from now: their expiry prompts fall due
    # while the suite runs; the receiver takes bob's and refuses the unlucky one's.
    ending_soon = iso(NOW - timedelta(days=30) + timedelta(seconds=20))
    for subscriber in (Facts.delivered, Facts.undelivered):
        record(subscriber, {"type": "purchase", "transactionId": f"{subscriber}-1", "productId": "com.example.pass.30d",
                            "purchaseDate": ending_soon})

    status, body = api("POST", "/v1/products/invalid",
                       {"identifiers": ["com.example.retired", XSS], "deviceId": "alices-iphone"})
    assert status == 201, body

    # The reminder projection and the dispatcher run beside the API: wait for
    # alice's reminders, bob's prompt sent, and a failed attempt for the unlucky one.
    def ready():
        reminders = {}
        for subscriber in (alice, Facts.delivered, Facts.undelivered):
            status, body = api("GET", f"/v1/reminders?subscriberId={subscriber}", key=SUPPORT_KEY)
            assert status == 200, body
            reminders[subscriber] = body["reminders"]
        return (len(reminders[alice]) >= 6
                and any(row["status"] == "sent" for row in reminders[Facts.delivered])
                and any(row["attempts"] >= 1 and row["lastError"] for row in reminders[Facts.undelivered])), reminders

    deadline = time.monotonic() + 120
    while True:
        done, reminders = ready()
        if done:
            break
        assert time.monotonic() < deadline, f"reminders never projected or delivered: {reminders}"
        time.sleep(1)
    return Facts()


@pytest.fixture(scope="session")
def browser():
    options = webdriver.ChromeOptions()
    options.binary_location = os.environ.get("CHROMIUM", "/usr/bin/chromium")
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                     "--window-size=1280,900", "--lang=en-US", "--force-color-profile=srgb"):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    service = Service(executable_path=os.environ.get("CHROMEDRIVER", "/usr/bin/chromedriver"))
    driver = webdriver.Chrome(service=service, options=options)
    driver.set_page_load_timeout(30)
    yield driver
    driver.quit()


class Console:
    """The console in the browser, as a person uses it."""

    def __init__(self, driver):
        self.driver = driver

    def wait(self, seconds=15):
        # The page re-renders while a wait polls it: an element found a moment
        # ago may be gone by the time its text is read; look again.
        return WebDriverWait(self.driver, seconds, ignored_exceptions=(StaleElementReferenceException,))

    def find(self, css):
        return self.driver.find_element(By.CSS_SELECTOR, css)

    def find_all(self, css):
        return self.driver.find_elements(By.CSS_SELECTOR, css)

    def visible(self, css, seconds=15):
        return self.wait(seconds).until(EC.visibility_of_element_located((By.CSS_SELECTOR, css)))

    def open(self, fragment=""):
        self.driver.get(f"{BASE_URL}/console{fragment}")

    def sign_out_if_needed(self):
        self.open()
        self.driver.execute_script("sessionStorage.clear()")
        self.open()
        self.visible("#signin-key")

    def sign_in(self, key, name=ACTOR):
        self.sign_out_if_needed()
        name_field = self.find("#signin-name")
        name_field.clear()
        if name:
            name_field.send_keys(name)
        field = self.find("#signin-key")
        field.clear()
        field.send_keys(key)
        self.find("#signin-submit").click()

    def signed_in(self, key=SUPPORT_KEY, name=ACTOR):
        self.sign_in(key, name)
        self.visible("#search-input")
        self.settled()

    def settled(self, seconds=20):
        """Waits until the page has no loading placeholders left."""
        self.wait(seconds).until(lambda driver: not driver.find_elements(By.CSS_SELECTOR, "main .loading")
                                 and driver.find_elements(By.CSS_SELECTOR, "main h1"))

    def search(self, text):
        field = self.find("#search-input")
        field.clear()
        field.send_keys(text)
        self.find("#search-submit").click()

    def open_subscriber(self, subscriber, at=None):
        fragment = "#/subscriber?id=" + urllib.parse.quote(subscriber, safe="")
        if at:
            fragment += "&at=" + urllib.parse.quote(at, safe="")
        self.driver.get(f"{BASE_URL}/console{fragment}")
        self.visible("#entitlements")
        self.settled()

    def screenshot(self, name, width, mobile=False, height=None):
        """A screenshot at `width` CSS pixels: the whole page, or its top `height` pixels."""
        os.makedirs(SCREENSHOTS, exist_ok=True)
        metrics = {"width": width, "height": height or 900, "deviceScaleFactor": 2 if mobile else 1, "mobile": mobile}
        self.driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", metrics)
        self.driver.execute_script("window.scrollTo(0, 0)")
        time.sleep(0.4)
        if height is None:
            page = self.driver.execute_script(
                "return Math.ceil(Math.max(document.body.scrollHeight, document.documentElement.scrollHeight))")
            self.driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {**metrics, "height": min(page, 12000)})
            time.sleep(0.4)
        path = os.path.join(SCREENSHOTS, name)
        self.driver.save_screenshot(path)
        self.driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
        return path

    def severe_console_messages(self):
        return [entry for entry in self.driver.get_log("browser") if entry["level"] == "SEVERE"]


@pytest.fixture()
def console(browser):
    return Console(browser)
