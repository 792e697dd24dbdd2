"""The support console in headless Chromium (Debian's), against a running
service with the facts of conftest.py loaded."""

import json
import urllib.request
from datetime import timedelta

import pytest
from selenium.common.exceptions import NoAlertPresentException
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import Select

from conftest import ADMIN_KEY, BASE_URL, INGEST_KEY, SUPPORT_KEY, XSS, days, iso

POLICY = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
          "object-src 'none'; base-uri 'none'; frame-ancestors 'none'")


def no_alert(driver):
    try:
        text = driver.switch_to.alert.text
    except NoAlertPresentException:
        return True
    pytest.fail(f"an alert opened: {text!r}")


def script_errors(console):
    """SEVERE browser messages other than failed requests (404s of endpoints
    this server lacks are expected): script errors, CSP refusals."""
    return [entry["message"] for entry in console.severe_console_messages()
            if "Failed to load resource" not in entry["message"]]


def test_console_headers():
    for path, content_type in (("/console", "text/html; charset=utf-8"),
                               ("/console/app.js", "text/javascript; charset=utf-8"),
                               ("/console/console.css", "text/css; charset=utf-8")):
        with urllib.request.urlopen(BASE_URL + path, timeout=10) as response:
            assert response.status == 200
            assert response.headers["Content-Type"] == content_type
            assert response.headers["Content-Security-Policy"] == POLICY
            assert response.headers["X-Content-Type-Options"] == "nosniff"
            assert response.headers["Referrer-Policy"] == "no-referrer"


def test_a_wrong_key_shows_a_clear_message(console, facts):
    console.sign_in("not-a-key")
    console.wait().until(lambda _: "not accepted" in console.find("#signin-message").text)
    assert console.find("#app").is_displayed() is False

    console.screenshot("signin-wrong-key.png", 1280)

    console.sign_in(INGEST_KEY)
    console.wait().until(lambda _: "support or admin" in console.find("#signin-message").text)
    assert console.driver.execute_script("return sessionStorage.length") == 0


def test_the_right_key_signs_in_and_is_kept_for_the_tab(console, facts):
    console.signed_in(SUPPORT_KEY)
    assert console.find("#role").text.lower() == "support key"
    assert console.driver.execute_script("return sessionStorage.getItem('subledger.console.key')") == SUPPORT_KEY
    console.driver.refresh()
    console.visible("#search-input")
    console.find("#sign-out").click()
    console.visible("#signin-key")
    assert console.driver.execute_script("return sessionStorage.length") == 0


def test_search_by_transaction_goes_to_its_subscriber(console, facts):
    console.signed_in()
    console.search(facts.pass_transaction)
    console.wait().until(lambda _: console.find_all("#subscriber-id"))
    console.settled()
    assert console.find("#subscriber-id").text == facts.subscriber
    assert f"belongs to subscriber {facts.subscriber}" in console.find("#search-message").text
    # An original transaction id, and a subscriber id, lead to the same page.
    console.search(facts.monthly_original)
    console.wait().until(lambda _: "console-monthly-1" in console.find("#search-message").text)
    console.settled()
    assert console.find("#subscriber-id").text == facts.subscriber
    console.search("nobody-at-all")
    console.wait().until(lambda _: "Nothing found" in console.find("#search-message").text)


def test_subscriber_page_now(console, facts):
    console.signed_in()
    console.open_subscriber(facts.subscriber)
    entitlement = console.find('[data-entitlement="pro"]')
    assert entitlement.get_attribute("data-active") == "true"
    assert "Active" in entitlement.find_element(By.CSS_SELECTOR, ".badge").text
    reasons = entitlement.find_elements(By.CSS_SELECTOR, ".reason")
    assert reasons and reasons[0].text.startswith("Active:"), [reason.text for reason in reasons]
    assert "console-pass-1" in entitlement.text  # the transaction that grants it now

    # The timeline: stacked periods, the refunded renewal, reminders, now.
    assert len(console.find_all("svg.timeline rect.period")) == 2
    assert len(console.find_all("svg.timeline rect.term")) >= 1
    assert len(console.find_all("svg.timeline rect.revoked")) == 1
    assert len(console.find_all("svg.timeline .refund-mark")) == 1
    assert len(console.find_all("svg.timeline .reminder-tick")) >= 3
    assert console.find_all("svg.timeline .reminder-tick.status-pending")
    assert console.find_all("svg.timeline .reminder-tick.status-cancelled")
    assert len(console.find_all("svg.timeline line.now-line")) == 1
    assert console.find_all("svg.timeline .purchase")

    # History: every event, with summary, source and environment; raw data expands.
    request = urllib.request.Request(f"{BASE_URL}/v1/subscribers/{facts.subscriber}/history",
                                     headers={"Authorization": f"Bearer {SUPPORT_KEY}"})
    with urllib.request.urlopen(request, timeout=10) as response:
        body = json.loads(response.read())
    events = console.find_all("#history li.event")
    assert len(events) == len(body["events"]) >= 7
    assert events[0].find_element(By.CSS_SELECTOR, ".summary").text == body["events"][0]["summary"]
    assert "api" in events[0].text and "Production" in events[0].text
    assert any("Sandbox" in event.text for event in events)
    assert any(event.get_attribute("data-type") == "refunded" for event in events)
    raw = events[0].find_element(By.CSS_SELECTOR, "details")
    raw.find_element(By.CSS_SELECTOR, "summary").click()
    assert '"transactionId": "console-monthly-1"' in raw.find_element(By.CSS_SELECTOR, "pre").text

    # Devices, reminders with delivery details, notifications section.
    devices = console.find("#devices").text
    assert "alices-iphone" in devices and "alices-ipad" in devices
    reminders = console.find("#reminders")
    assert "pending" in reminders.text and "cancelled" in reminders.text
    assert "attempts" in reminders.text.lower()
    assert "No App Store notifications" in console.find("#notifications").text
    assert script_errors(console) == []


def test_what_the_app_store_says_is_shown(console, facts):
    console.signed_in()
    console.open_subscriber(facts.family)
    store = console.find("#store-transactions").text
    assert "console-family-1" in store
    assert "Family Sharing" in store and "introductory · pay up front" in store
    assert "2.99 EUR · DEU" in store
    assert "REFUND_PRORATED · 25% · an issue with the app" in store
    reasons = " ".join(reason.text for reason in console.find_all('[data-entitlement="level2"] .reason'))
    assert "prorated refund (25% refunded)" in reasons, reasons
    assert script_errors(console) == []


def test_the_as_of_picker_rerenders_at_that_instant(console, facts):
    console.signed_in()
    console.open_subscriber(facts.subscriber)
    after = facts.coverage_end + timedelta(days=10)
    picker = console.find("#asof")
    console.driver.execute_script("arguments[0].value = arguments[1]", picker, iso(after)[:19])
    console.find("#asof-apply").click()
    console.wait().until(lambda _: "at=" in console.driver.current_url)
    console.wait().until(lambda _: console.find_all('[data-entitlement="pro"][data-active="false"]'))
    console.settled()
    entitlement = console.find('[data-entitlement="pro"]')
    assert "Inactive" in entitlement.find_element(By.CSS_SELECTOR, ".badge").text
    assert entitlement.find_element(By.CSS_SELECTOR, ".reason").text.startswith("Not active:")
    assert iso(after).replace("T", " ").replace("Z", " UTC") in console.find(".asof-state").text
    assert console.find_all("svg.timeline line.asof-line")
    assert "expired" in console.find("#subscriptions").text

    # Now goes back to the present.
    console.find("#asof-now").click()
    console.wait().until(lambda _: "at=" not in console.driver.current_url)
    console.wait().until(lambda _: console.find_all('[data-entitlement="pro"][data-active="true"]'))

    # The Sandbox view is asked for with ?environment=Sandbox (a server
    # without per-environment views says so above its only view).
    Select(console.find("#environment")).select_by_value("Sandbox")
    console.find("#asof-apply").click()
    console.wait().until(lambda _: "environment=Sandbox" in console.driver.current_url)
    console.settled()
    assert "Sandbox view" in console.find(".asof-state").text


def test_reminder_delivery_is_shown(console, facts):
    console.signed_in()
    console.open_subscriber(facts.delivered)
    assert console.find_all("svg.timeline .reminder-tick.status-sent")
    assert any(event.get_attribute("data-type") == "reminder_sent" for event in console.find_all("#history li.event"))
    console.open_subscriber(facts.undelivered)
    reminders = console.find("#reminders").text
    assert "500" in reminders, reminders  # the last error, beside the attempts
    assert console.find_all("svg.timeline .reminder-tick.status-pending")


def test_ledger_text_is_shown_as_text(console, facts):
    console.signed_in()
    console.search(facts.xss_subscriber)
    console.wait().until(lambda _: console.find_all("#subscriber-id") and console.find_all("#devices"))
    console.settled()
    no_alert(console.driver)
    assert console.find("#subscriber-id").text == facts.xss_subscriber
    assert facts.xss_device in console.find("#devices").text
    assert facts.xss_reason in console.find("#history").text
    injected = console.driver.execute_script(
        "return document.querySelectorAll('main script, main img, main b, #search-message script').length")
    assert injected == 0
    assert console.driver.execute_script("return document.scripts.length") == 1
    # The invalid identifier list shows the same string as text.
    console.screenshot("subscriber-xss-desktop.png", 1280)
    console.open("#/products")
    console.settled()
    assert XSS in console.find("main table").text
    no_alert(console.driver)
    assert script_errors(console) == []


def test_lists(console, facts):
    console.signed_in()
    console.open("#/reminders?status=pending")
    console.settled()
    assert facts.subscriber in console.find("main table").text
    assert "HTTP 500" in console.find("main table").text  # the unlucky one's last error
    console.screenshot("reminders-desktop.png", 1280)
    console.open("#/reminders?status=sent")
    console.settled()
    assert facts.delivered in console.find("main table").text
    console.open("#/reminders?status=failed")
    console.settled()
    assert "No reminder matches." in console.find("main").text
    console.open("#/notifications")
    console.settled()
    assert "No notification matches." in console.find("main").text
    console.open("#/subscriptions")
    console.settled()
    text = console.find("main").text
    assert "not available on this server yet" in text or console.find_all("main table")
    console.open("#/parked")
    console.settled()
    assert "admin" in console.find("main").text
    console.signed_in(ADMIN_KEY)
    console.open("#/parked")
    console.settled()
    assert "No parked events" in console.find("main").text


def test_keyboard_reaches_search_and_navigation(console, facts):
    console.signed_in()
    body = console.find("body")
    body.send_keys(Keys.TAB)
    focused = console.driver.switch_to.active_element
    assert focused.get_attribute("id") == "skip-link"
    seen = []
    for _ in range(12):
        console.driver.switch_to.active_element.send_keys(Keys.TAB)
        element = console.driver.switch_to.active_element
        seen.append(element.get_attribute("id") or element.text)
    assert "search-input" in seen and "Reminders" in seen and "sign-out" in seen, seen


def test_overview_and_screenshots(console, facts):
    console.signed_in()
    console.open("#/")
    console.settled()
    main = console.find("main").text
    assert "Active subscribers now" in main
    assert "Reminders, last 14 days" in main
    assert "1 sent, 0 failed" in console.find("#reminder-chart").text
    assert console.find_all("#reminder-chart rect.bar.reminder-sent")
    assert console.find_all("#reminder-chart svg.chart")
    stats = console.find("#active-now").text
    assert "not available on this server yet" in stats or console.find_all("#active-now .big-number")
    assert script_errors(console) == []
    console.screenshot("overview-desktop.png", 1280)
    console.screenshot("overview-phone.png", 390, mobile=True)

    console.open_subscriber(facts.subscriber)
    console.screenshot("subscriber-desktop.png", 1280)
    console.screenshot("subscriber-desktop-top.png", 1280, height=1000)  # docs/console-subscriber.png
    console.screenshot("subscriber-phone.png", 390, mobile=True)
    # On a phone the page is one column and nothing but the wide tables and
    # the timeline (which scroll inside their cards) is wider than the screen.
    console.driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                                   {"width": 390, "height": 844, "deviceScaleFactor": 2, "mobile": True})
    overflow = console.driver.execute_script("return document.documentElement.scrollWidth")
    console.driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
    assert overflow <= 390


# Answers in the contract's shapes (docs/api.md) for endpoints another branch is
# building, served to the page by a fetch stand-in, so the overview's numbers
# and chart and the subscriptions list are tested before those land.
SAMPLE = {
    "/v1/stats": {"at": iso(days(0)), "entitlements": {"pro": 12, "level2": 3},
                  "products": {"com.example.pass.30d": 9, "com.example.pro.monthly": 3, "com.example.level2": 3},
                  "types": {"non-renewing": 9, "auto-renewable": 3, "non-consumable": 3}},
    "/v1/stats/active": {"series": [{"at": iso(days(day - 29)), "active": 6 + (day * 7) % 9} for day in range(30)]},
    "/v1/subscriptions": {"subscriptions": [{
        "subscriberId": "console-alice", "group": "pass", "productId": "com.example.pass.30d", "type": "non-renewing",
        "status": "active", "expiresAt": iso(days(50)), "autoRenew": False, "originalTransactionId": "console-pass-1"}],
        "nextCursor": "page-2"},
}

STAND_IN = """
(() => {
  const sample = %s;
  const requested = [];
  const original = window.fetch.bind(window);
  window.consoleRequests = requested;
  window.fetch = (input, init) => {
    const url = new URL(typeof input === 'string' ? input : input.url, location.href);
    requested.push(url.pathname + url.search);
    if (Object.prototype.hasOwnProperty.call(sample, url.pathname)) {
      return Promise.resolve(new Response(JSON.stringify(sample[url.pathname]),
        { status: 200, headers: { 'Content-Type': 'application/json' } }));
    }
    return original(input, init);
  };
})();
"""


def test_overview_and_subscriptions_draw_the_contract_shapes(console, facts):
    driver = console.driver
    script = driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": STAND_IN % json.dumps(SAMPLE)})
    try:
        console.signed_in()
        console.open("#/")
        console.settled()
        numbers = [item.text.split("\n") for item in console.find_all("#active-now .big-numbers li")]
        assert numbers == [["12", "pro"], ["3", "level2"]]
        assert len(console.find_all("#active-chart svg.chart polyline")) == 1
        assert len(console.find_all("#active-chart svg.chart circle")) == 30
        requested = driver.execute_script("return window.consoleRequests")
        assert any(url.startswith("/v1/stats/active?from=") and "interval=day" in url for url in requested), requested
        console.screenshot("overview-sample-stats-desktop.png", 1280)

        Select(console.find("#chart-range")).select_by_value("12w")
        console.wait().until(lambda _: "range=12w" in driver.current_url)
        console.settled()
        requested = driver.execute_script("return window.consoleRequests")
        assert any("interval=week" in url for url in requested), requested
        Select(console.find("#chart-entitlement")).select_by_value("pro")
        console.wait().until(lambda _: "entitlement=pro" in driver.current_url)
        console.settled()
        requested = driver.execute_script("return window.consoleRequests")
        assert any("interval=week" in url and "entitlement=pro" in url for url in requested), requested

        console.open("#/subscriptions?status=active")
        console.settled()
        assert "console-alice" in console.find("main table").text
        console.find("#next-page").click()
        console.wait().until(lambda _: "cursor=page-2" in driver.current_url)
        console.settled()
        requested = driver.execute_script("return window.consoleRequests")
        assert any(url.startswith("/v1/subscriptions?") and "cursor=page-2" in url and "status=active" in url
                   for url in requested), requested
        assert script_errors(console) == []
    finally:
        driver.execute_cdp_cmd("Page.removeScriptToEvaluateOnNewDocument", {"identifier": script["identifier"]})
