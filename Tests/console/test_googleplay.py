"""The console's Google Play card, in headless Chromium.

The service runs with Google Play configured against a stand-in for Google
(google_standin.py); a purchase is linked through the API as an app's
backend would, fetched from the stand-in, and the subscriber's page shows
what Google said and which store each subscription came from.
"""

from selenium.webdriver.common.by import By

from conftest import api

TOKEN = "console-play-token-0001"
SUBSCRIBER = "console-play"


def test_the_google_play_card_shows_what_google_said(console):
    status, body = api("POST", f"/v1/subscribers/{SUBSCRIBER}/googleplay/purchases",
                       {"purchaseToken": TOKEN, "productId": "pro_monthly", "type": "subscription"})
    assert status == 200, body
    assert any(entitlement["id"] == "pro" and entitlement["active"] for entitlement in body["entitlements"])

    console.signed_in()
    console.open_subscriber(SUBSCRIBER)
    card = console.visible("#google-play")
    text = card.text
    assert "What Google Play says" in text
    assert "pro_monthly:monthly" in text
    assert "GPA.3383-0411-6412-45078" in text
    assert "active" in text
    # Acknowledged right after the link; the card shows the state as fetched (pending then).
    assert "not yet" in text
    token_cell = card.find_element(By.CSS_SELECTOR, "td .mono[title]")
    assert token_cell.get_attribute("title") == TOKEN

    subscriptions = console.find("#subscriptions").text
    assert "Google Play" in subscriptions

    entitlement = console.find('[data-entitlement="pro"]')
    assert entitlement.get_attribute("data-active") == "true"
    assert "Google Play" in entitlement.text

    console.screenshot("subscriber-google-play.png", 1280)
