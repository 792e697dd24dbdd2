"""The webhook deliveries page: the change feed's endpoints with their
pending backlog, one endpoint's deliveries by status, and a retry behind a
confirmation (admin keys only). The receiver refuses `console-unlucky…`
subscribers until it is healed, as a receiver fixed by its owner would be."""

import json
import os
import re
import time
import urllib.parse
import urllib.request

from selenium.webdriver.common.by import By

from conftest import ADMIN_KEY, SUPPORT_KEY, api, days, iso, record
from test_console import script_errors

RECEIVER_URL = os.environ.get("CONSOLE_RECEIVER_URL", "http://127.0.0.1:9000")
HOSTILE_DESCRIPTION = '<img src=x onerror="alert(4)"> backend'


def deliveries(webhook, status=None):
    query = "?limit=1000" + (f"&status={status}" if status else "")
    code, body = api("GET", f"/v1/webhooks/{webhook}/deliveries{query}", key=ADMIN_KEY)
    assert code == 200, body
    return body["deliveries"]


def heal(subscriber):
    request = urllib.request.Request(RECEIVER_URL + "/heal", data=json.dumps({"subscriberId": subscriber}).encode(),
                                     method="POST", headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.status == 204


def rows_of(console, subscriber):
    return [row for row in console.find_all("#deliveries tr.delivery")
            if subscriber in row.find_element(By.CSS_SELECTOR, "td[data-label='Subscriber']").text.split()]


def test_an_admin_sees_a_failing_delivery_and_retries_it(console, facts):
    subscriber = "console-unlucky-webhook"
    code, endpoint = api("POST", "/v1/webhooks", {"url": RECEIVER_URL + "/changes", "description": HOSTILE_DESCRIPTION},
                         key=ADMIN_KEY)
    assert code == 201, endpoint
    webhook = endpoint["id"]
    record(subscriber, {"type": "purchase", "transactionId": "console-unlucky-webhook-1",
                        "productId": "com.example.coins.100", "purchaseDate": iso(days(-1))})

    # The receiver refuses it: the delivery stays pending with its error.
    deadline = time.monotonic() + 90
    while True:
        mine = [row for row in deliveries(webhook) if row["subscriberId"] == subscriber]
        if any(row["attempts"] >= 1 and row["lastError"] for row in mine):
            break
        assert time.monotonic() < deadline, f"no failed attempt: {mine}"
        time.sleep(1)
    first = next(row for row in mine if row["attempts"] >= 1)
    assert first["status"] == "pending"

    # A support key is told the page needs an admin key, and sees nothing of it.
    console.signed_in(SUPPORT_KEY)
    console.open("#/deliveries?webhook=" + urllib.parse.quote(webhook))
    console.settled()
    assert "admin" in console.find("#deliveries-admin-only").text
    assert console.find_all("main table") == [] and console.find_all(".retry-open") == []
    assert webhook not in console.find("main").text

    console.signed_in(ADMIN_KEY, name="Ann Admin")
    console.find("#nav a[href='#/deliveries']").click()
    console.settled()
    endpoint_row = console.visible(f"tr.webhook-{webhook}")
    # The description is shown as text, never as markup.
    assert HOSTILE_DESCRIPTION in endpoint_row.text
    assert console.find_all("#webhook-endpoints img") == []
    assert re.fullmatch(r"(at least )?\d+ (s|min)", endpoint_row.find_element(By.CSS_SELECTOR, ".oldest-pending").text)
    assert int(endpoint_row.find_element(By.CSS_SELECTOR, "td[data-label='Pending']").text.rstrip("+")) >= 1

    # Its pending deliveries, by the status filter.
    console.open("#/deliveries?webhook=" + urllib.parse.quote(webhook) + "&status=pending")
    console.settled()
    assert console.find("#deliveries-url").text == RECEIVER_URL + "/changes"
    row = console.wait().until(lambda _: rows_of(console, subscriber))[0]
    assert "pending" in row.text and "500" in row.find_element(By.CSS_SELECTOR, "td[data-label='Last error']").text
    assert all("pending" in other.text for other in console.find_all("#deliveries tr.delivery"))

    # Retry asks first; cancel leaves it as it was.
    row.find_element(By.CSS_SELECTOR, ".retry-open").click()
    question = console.visible(".retry-question")
    assert first["id"] in question.text and first["changeId"] in question.text
    console.find(".retry-cancel").click()
    assert console.find_all(".retry-confirm") == []
    assert console.find_all(f".retry-open[data-delivery='{first['id']}']")

    # The receiver is fixed; the retry sends it at once instead of at its next backoff.
    heal(subscriber)
    console.find(f".retry-open[data-delivery='{first['id']}']").click()
    console.visible(".retry-confirm")
    console.screenshot("deliveries-desktop.png", 1280)
    console.find(".retry-confirm").click()
    console.wait().until(lambda _: console.find_all("#page-message") and "pending again" in console.find("#page-message").text)
    console.settled()

    # It moves to sent (well before the backoff would have tried it again).
    deadline = time.monotonic() + 30
    while True:
        console.open("#/deliveries?webhook=" + urllib.parse.quote(webhook) + "&status=sent")
        console.settled()
        if rows_of(console, subscriber):
            break
        assert time.monotonic() < deadline, f"never sent: {deliveries(webhook)}"
        time.sleep(1)
    row = next(row for row in rows_of(console, subscriber) if first["changeId"] in row.text)
    assert "sent" in row.find_element(By.CSS_SELECTOR, "td[data-label='Status']").text
    assert row.find_elements(By.CSS_SELECTOR, ".retry-open") == []
    after = {row["id"]: row for row in deliveries(webhook)}[first["id"]]
    assert after["status"] == "sent" and after["lastError"] is None
    assert ADMIN_KEY not in console.driver.page_source
    assert script_errors(console) == []
