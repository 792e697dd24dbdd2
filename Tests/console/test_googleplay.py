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

    # The timeline draws the Play subscription in its group's lane, a paid term.
    lane = console.find('svg.timeline g.lane[data-lane="pro"]')
    terms = lane.find_elements(By.CSS_SELECTOR, "rect.term")
    assert len(terms) == 1
    titles = [t.get_attribute("textContent") for t in lane.find_elements(By.CSS_SELECTOR, "g > title")]
    assert any("pro_monthly:monthly" in t and "paid until" in t for t in titles), titles

    console.screenshot("subscriber-google-play.png", 1280)


def test_a_subscription_on_hold_is_listed_and_drawn_as_held(console):
    held = "console-play-held"
    status, body = api("POST", f"/v1/subscribers/{held}/googleplay/purchases",
                       {"purchaseToken": "console-play-token-0002", "productId": "pro_monthly", "type": "subscription"})
    assert status == 200, body
    assert [s["status"] for s in body["subscriptions"]] == ["on_hold"]
    assert not any(entitlement["active"] for entitlement in body["entitlements"])

    console.signed_in()
    console.open_subscriber(held)
    assert "on_hold" in console.find("#subscriptions").text
    lane = console.find('svg.timeline g.lane[data-lane="pro"]')
    bars = lane.find_elements(By.CSS_SELECTOR, "rect.held")
    assert len(bars) == 1
    assert "on hold" in bars[0].find_element(By.XPATH, "..").get_attribute("textContent")
    assert console.find_all(".legend .swatch.held")
