"""Support actions in the console: the name asked at sign-in and sent with
every call, grants and revocations (admin keys only, with a reason and a
confirmation), the audit of the subscriber viewed, and erasure behind a
typed confirmation."""

import os
import urllib.parse

from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select

from conftest import ADMIN_KEY, SCREENSHOTS, SUPPORT_KEY, api, days, iso, record


def audit_of(subscriber):
    status, body = api("GET", "/v1/audit?limit=1000&subscriberId=" + urllib.parse.quote(subscriber, safe=""), key=ADMIN_KEY)
    assert status == 200, body
    return body["entries"]


def test_sign_in_asks_for_a_name_and_every_call_carries_it(console, facts):
    # Without a name the form is not sent (the field is required).
    console.sign_in(SUPPORT_KEY, name=None)
    assert console.driver.execute_script("return document.getElementById('signin-name').validity.valueMissing") is True
    assert console.find("#app").is_displayed() is False
    assert console.driver.execute_script("return sessionStorage.length") == 0

    console.signed_in(SUPPORT_KEY, name="Rita Ramos")
    assert console.driver.execute_script("return sessionStorage.getItem('subledger.console.actor')") == "Rita Ramos"
    console.open_subscriber(facts.subscriber)
    looks = [entry for entry in audit_of(facts.subscriber) if entry["actor"] == "Rita Ramos"]
    actions = {entry["action"] for entry in looks}
    assert {"state", "explain", "history"} <= actions, looks
    assert all(entry["role"] == "support" and len(entry["keyFingerprint"]) == 12 for entry in looks)
    assert all(SUPPORT_KEY not in str(entry) for entry in looks)


def test_support_keys_see_no_actions(console, facts):
    console.signed_in(SUPPORT_KEY)
    console.open_subscriber(facts.subscriber)
    console.visible("#grants")
    assert console.find_all("#grant-form") == []
    assert "admin key" in console.find("#grants-admin-only").text
    assert console.find_all(".revoke-open") == []
    assert console.find_all("#erasure") == []
    assert "admin key" in console.find("#audit").text


def test_an_admin_grants_and_revokes_with_a_reason_and_a_confirmation(console, facts):
    subscriber = "console-grantee"
    record(subscriber, {"type": "purchase", "transactionId": "console-grantee-coins", "productId": "com.example.coins.100",
                        "purchaseDate": iso(days(-1))})
    console.signed_in(ADMIN_KEY, name="Ann Admin")
    console.open_subscriber(subscriber)
    assert console.find_all('[data-entitlement="level2"][data-active="true"]') == []

    # No reason: refused in the page, nothing sent.
    Select(console.find("#grant-entitlement")).select_by_value("level2")
    Select(console.find("#grant-length")).select_by_value("P30D")
    console.find("#grant-review").click()
    assert console.driver.execute_script("return document.getElementById('grant-reason').validity.valueMissing") is True
    assert not console.find("#grant-confirm").is_displayed()
    # Blanks are no reason either.
    console.find("#grant-reason").send_keys("   ")
    console.find("#grant-review").click()
    console.wait().until(lambda _: "reason" in console.find("#grant-error").text.lower())
    assert not console.find("#grant-confirm").is_displayed()
    console.find("#grant-reason").clear()

    # With a reason: a confirmation first, which can be cancelled.
    console.find("#grant-reason").send_keys("Apology for the outage")
    console.find("#grant-review").click()
    confirm = console.visible("#grant-confirm")
    assert "level2" in confirm.text and subscriber in confirm.text and "30 days" in confirm.text
    console.find("#grant-cancel").click()
    assert not console.find("#grant-confirm").is_displayed()
    assert [entry for entry in audit_of(subscriber) if entry["action"] == "grant"] == []

    console.find("#grant-review").click()
    console.visible("#grant-confirm-button").click()
    console.wait().until(lambda _: console.find_all("#page-message") and "Granted level2" in console.find("#page-message").text)
    console.settled()
    entitlement = console.visible('[data-entitlement="level2"]')
    assert entitlement.get_attribute("data-active") == "true"
    assert "support grant" in entitlement.text
    assert "Ann Admin (admin, key" in entitlement.text and "Apology for the outage" in entitlement.text
    row = console.find("#grants tr.grant")
    assert "active" in row.text and "Ann Admin" in row.text
    console.screenshot("support-actions-desktop.png", 1280)

    # Revoke: a reason is required, then it ends now.
    row.find_element(By.CSS_SELECTOR, ".revoke-open").click()
    confirm = console.visible(".revoke-confirm")
    confirm.click()
    console.wait().until(lambda _: "reason" in console.find("#grants .revoke .field-error").text.lower())
    console.find("#grants .revoke-reason").send_keys("Granted to the wrong account")
    console.find(".revoke-confirm").click()
    console.wait().until(lambda _: console.find_all("#page-message") and "Revoked grant" in console.find("#page-message").text)
    console.settled()
    assert console.visible('[data-entitlement="level2"]').get_attribute("data-active") == "false"
    assert "revoked" in console.find("#grants tr.grant").text

    # The audit card lists the actions and the reads, with the name typed at sign-in.
    audit = console.find("#audit").text
    assert "Ann Admin" in audit and "revoke_grant" in audit and "grant" in audit and "state" in audit
    actions = [(entry["action"], entry["actor"], entry["status"]) for entry in audit_of(subscriber)]
    assert ("grant", "Ann Admin", 201) in actions and ("revoke_grant", "Ann Admin", 200) in actions
    assert ADMIN_KEY not in console.driver.page_source
    console.screenshot("audit-desktop.png", 1280)


def test_erasure_needs_a_reason_and_the_subscriber_id_typed_and_erases(console, facts):
    """The erase card sends DELETE /v1/subscribers/{id} only with a reason and
    the id typed exactly; afterwards the page and the API say the subscriber
    was erased."""
    subscriber = "console-erasable"
    record(subscriber, {"type": "purchase", "transactionId": "console-erasable-1", "productId": "com.example.level2",
                        "purchaseDate": iso(days(-2)), "deviceId": "erasable-phone"})
    console.signed_in(ADMIN_KEY, name="Ann Admin")
    console.open_subscriber(subscriber)
    card = console.visible("#erasure")
    assert "permanent" in card.text and "cannot be undone" in card.text
    button = console.find("#erase-submit")
    assert button.get_attribute("disabled") is not None

    # The id typed exactly, but no reason: still disabled.
    console.find("#erase-typed").send_keys(subscriber)
    assert console.find("#erase-submit").get_attribute("disabled") is not None
    console.find("#erase-typed").clear()
    # A reason, and the id one letter short, or with other case: disabled.
    console.find("#erase-reason").send_keys("Account deleted by the user")
    console.find("#erase-typed").send_keys(subscriber[:-1])
    assert console.find("#erase-submit").get_attribute("disabled") is not None
    console.find("#erase-typed").clear()
    console.find("#erase-typed").send_keys(subscriber.upper())
    assert console.find("#erase-submit").get_attribute("disabled") is not None
    console.find("#erase-typed").clear()
    console.find("#erase-typed").send_keys(subscriber)
    assert console.find("#erase-submit").get_attribute("disabled") is None
    # Nothing was sent so far.
    status, body = api("GET", "/v1/subscribers/" + subscriber, key=SUPPORT_KEY)
    assert status == 200, body
    console.driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", card)
    card.screenshot(os.path.join(SCREENSHOTS, "erasure-card.png"))

    console.find("#erase-submit").click()
    console.wait(30).until(lambda _: console.find_all("#subscriber-erased")
                           or (console.find_all("#erase-error") and console.find("#erase-error").text))
    errors = console.find_all("#erase-error")
    assert console.find_all("#subscriber-erased"), errors[0].text if errors else "no message"
    assert "was erased" in console.find("#page-message").text
    assert console.find_all("#erasure") == [] and console.find_all("#grant-form") == []
    status, body = api("GET", "/v1/subscribers/" + subscriber, key=ADMIN_KEY)
    assert status == 404 and body["error"]["code"] == "erased", body
    # Only an admin learns of the erasure: to support it is an unknown id.
    status, body = api("GET", "/v1/subscribers/" + subscriber, key=SUPPORT_KEY)
    assert status == 404 and body["error"]["code"] == "subscriber_not_found", body

    # Opened again later, the page says it was erased.
    console.driver.get(console.driver.current_url.split("#")[0] + "#/subscriber?id=" + subscriber)
    console.driver.refresh()
    console.visible("#subscriber-erased")
    assert "erased" in console.find("#subscriber-erased").text
