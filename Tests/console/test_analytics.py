"""The analytics page in headless Chromium, against the worked example of
docs/analytics.md loaded over HTTP: the API answers the numbers worked out
there by hand, and the page draws the API's numbers, re-renders on a new
interval and downloads the CSV the API answers."""

import json
import os
import shutil
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from datetime import datetime, timezone

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select

from conftest import BASE_URL, SUPPORT_KEY, api, record

MONTHLY = "com.example.pro.monthly"
P = "analytics-"  # subscriber and transaction ids of this suite
FROM, THROUGH = "2026-03-01", "2026-03-04"  # the page's range: four days
DAY_QUERY = {"from": "2026-03-01T00:00:00Z", "to": "2026-03-05T00:00:00Z", "interval": "day"}
TRIAL = {"type": "introductory", "discount": "free_trial"}


def period(subscriber, kind, transaction, start, end, original=None, **terms):
    fact = {"type": kind, "transactionId": P + transaction, "productId": MONTHLY,
            "purchaseDate": f"2026-{start}:00Z", "expiresDate": f"2026-{end}:00Z", **terms}
    if original:
        fact["originalTransactionId"] = P + original
    record(P + subscriber, fact)


def read(path, query=None, accept="application/json", key=SUPPORT_KEY):
    """GET; answers (status, content type, body as text)."""
    url = BASE_URL + path + ("?" + urllib.parse.urlencode(query) if query else "")
    request = urllib.request.Request(url, headers={"Accept": accept, **({"Authorization": f"Bearer {key}"} if key else {})})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.headers["Content-Type"], response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.headers["Content-Type"], error.read().decode()


def analytics(query, path="/v1/analytics"):
    status, _, body = read(path, query)
    assert status == 200, body
    return json.loads(body)


@pytest.fixture(scope="module")
def example():
    """ann, ben, cat, dan and eve of docs/analytics.md, a family-shared copy
    (never counted) and a Sandbox purchase; then waits for the projection."""
    period("ann", "purchase", "ann-1", "02-03T09:00", "03-03T09:00", price="9.99", currency="USD")
    period("ann", "renewal", "ann-2", "03-03T09:00", "04-03T09:00", original="ann-1", price="9.99", currency="USD")
    period("ben", "purchase", "ben-1", "02-25T12:00", "03-04T12:00", offer=TRIAL)
    period("ben", "renewal", "ben-2", "03-04T12:00", "04-04T12:00", original="ben-1", price="9.99", currency="USD")
    period("cat", "purchase", "cat-1", "02-02T15:00", "03-02T15:00", price="9.99", currency="USD")
    period("dan", "purchase", "dan-1", "03-02T18:00", "04-02T18:00", price="8.49", currency="EUR", storefront="DEU")
    period("eve", "purchase", "eve-1", "03-03T10:00", "03-10T10:00", offer=TRIAL)
    period("gus", "purchase", "gus-1", "03-02T10:00", "04-02T10:00", price="9.99", currency="USD", ownershipType="FAMILY_SHARED")
    period("sam", "purchase", "sam-1", "03-02T10:00", "04-02T10:00", price="4.99", currency="USD", environment="Sandbox")
    record(P + "dan", {"type": "refund", "transactionId": P + "dan-1", "revocationDate": "2026-03-04T08:00:00Z"})

    # The projection follows the log: wait until /health says every
    # projection has caught up and two answers in a row agree.
    deadline = time.monotonic() + 90
    previous = None
    while True:
        status, health = api("GET", "/health")
        lags = (health or {}).get("projections", {})
        answer = analytics(DAY_QUERY) if status == 200 and "analytics" in lags and not any(lags.values()) else None
        if answer is not None and answer == previous:
            return answer
        assert time.monotonic() < deadline, f"the analytics projection never caught up: {health}"
        previous = answer
        time.sleep(1)


def values(body, metric):
    return [item["values"][metric] for item in body["series"]]


def test_the_worked_example_is_what_the_api_answers(example):
    body = example
    assert [item["start"] for item in body["series"]] == [f"2026-03-0{day}T00:00:00Z" for day in (1, 2, 3, 4)]
    assert [item["end"] for item in body["series"]] == [f"2026-03-0{day}T00:00:00Z" for day in (2, 3, 4, 5)]
    assert body["interval"] == "day"
    expected = {
        "active_subscriptions": [2, 2, 2, 2],
        "active_trials": [1, 1, 2, 1],
        "mrr": [{"USD": "19.98"}, {"EUR": "8.49", "USD": "9.99"}, {"EUR": "8.49", "USD": "9.99"}, {"USD": "19.98"}],
        "new_subscriptions": [0, 1, 0, 1],
        "trial_starts": [0, 0, 1, 0],
        "trial_conversions": [0, 0, 0, 1],
        "renewals": [0, 0, 1, 0],
        "churned": [0, 1, 0, 1],
        "churn_rate": ["0.0000", "0.5000", "0.0000", "0.5000"],
        "revenue": [{}, {"EUR": "8.49"}, {"USD": "9.99"}, {"USD": "9.99"}],
        "refunds": [{}, {}, {}, {"EUR": "8.49"}],
        "net_revenue": [{}, {"EUR": "8.49"}, {"USD": "9.99"}, {"EUR": "-8.49", "USD": "9.99"}],
    }
    assert list(body["series"][0]["values"]) == list(expected), "the metrics, in the contract's order"
    mismatches = {metric: values(body, metric) for metric, numbers in expected.items() if values(body, metric) != numbers}
    assert mismatches == {}, f"answered {mismatches}, docs/analytics.md says {({m: expected[m] for m in mismatches})}"

    week = analytics({"from": "2026-03-02T00:00:00Z", "to": "2026-03-09T00:00:00Z", "interval": "week"})
    assert [(item["start"], item["end"]) for item in week["series"]] == [("2026-03-02T00:00:00Z", "2026-03-09T00:00:00Z")]
    assert {metric: week["series"][0]["values"][metric] for metric in (
        "active_subscriptions", "active_trials", "mrr", "new_subscriptions", "trial_starts", "trial_conversions",
        "renewals", "churned", "churn_rate", "revenue", "refunds")} == {
        "active_subscriptions": 2, "active_trials": 1, "mrr": {"USD": "19.98"}, "new_subscriptions": 2, "trial_starts": 1,
        "trial_conversions": 1, "renewals": 1, "churned": 2, "churn_rate": "1.0000",
        "revenue": {"EUR": "8.49", "USD": "19.98"}, "refunds": {"EUR": "8.49"}}
    # from is rounded down to its interval's start: Sunday, Mar 1, to Monday, Feb 23.
    sunday = analytics({"from": "2026-03-01T00:00:00Z", "to": "2026-03-05T00:00:00Z", "interval": "week"})
    assert [item["start"] for item in sunday["series"]] == ["2026-02-23T00:00:00Z", "2026-03-02T00:00:00Z"]

    month = analytics({"from": "2026-03-01T00:00:00Z", "to": "2026-04-01T00:00:00Z", "interval": "month",
                       "metrics": "active_subscriptions,active_trials,mrr,churned,churn_rate"})
    assert [item["values"] for item in month["series"]] == [{
        "active_subscriptions": 2, "active_trials": 0, "mrr": {"USD": "19.98"}, "churned": 2, "churn_rate": "1.0000"}]

    # Sandbox only with environment=Sandbox; churn_rate is null while nothing was active at the start.
    sandbox = analytics({**DAY_QUERY, "environment": "Sandbox", "metrics": "active_subscriptions,mrr,churn_rate"})
    assert [item["values"] for item in sandbox["series"]] == [
        {"active_subscriptions": 0, "mrr": {}, "churn_rate": None},
        {"active_subscriptions": 1, "mrr": {"USD": "4.99"}, "churn_rate": None},
        {"active_subscriptions": 1, "mrr": {"USD": "4.99"}, "churn_rate": "0.0000"},
        {"active_subscriptions": 1, "mrr": {"USD": "4.99"}, "churn_rate": "0.0000"}]
    play = analytics({**DAY_QUERY, "store": "google_play", "metrics": "active_subscriptions,revenue"})
    assert [item["values"] for item in play["series"]] == [{"active_subscriptions": 0, "revenue": {}}] * 4
    grouped = analytics({**DAY_QUERY, "groupBy": "product", "metrics": "new_subscriptions"})
    assert {item["group"] for item in grouped["series"]} == {MONTHLY}

    # The cohorts: February's (ann, cat; ben's trial) and March's (ben, dan; eve's trial).
    cohorts = analytics({"from": "2026-02-01T00:00:00Z", "to": "2026-04-01T00:00:00Z", "interval": "month"}, "/v1/analytics/cohorts")
    february, march = months_ended(2026, 2), months_ended(2026, 3)
    assert cohorts == {"interval": "month", "cohorts": [
        {"start": "2026-02-01T00:00:00Z", "size": 2, "retained": [1] + [0] * (february - 1), "trialStarts": 1, "trialConversions": 1},
        {"start": "2026-03-01T00:00:00Z", "size": 2, "retained": [0] * march, "trialStarts": 1, "trialConversions": 0}]}


def months_ended(year, month):
    """How long a monthly cohort's `retained` is now: k counts while the end
    of the (k+1)-th month after the cohort's has passed."""
    now = datetime.now(timezone.utc)
    count = 0
    while True:
        index = year * 12 + month - 1 + count + 2  # the month that starts where the (count+1)-th month after ends
        if datetime(index // 12, index % 12 + 1, 1, tzinfo=timezone.utc) > now:
            return count
        count += 1


def test_the_csv_is_the_series_and_bad_requests_name_the_field(example):
    status, content_type, text = read("/v1/analytics", {**DAY_QUERY, "metrics": "active_subscriptions,churned,mrr"}, accept="text/csv")
    assert status == 200 and content_type.startswith("text/csv"), (status, content_type)
    assert text.splitlines() == [
        "start,end,currency,active_subscriptions,churned,mrr",
        "2026-03-01T00:00:00Z,2026-03-02T00:00:00Z,USD,2,0,19.98",
        "2026-03-02T00:00:00Z,2026-03-03T00:00:00Z,EUR,2,1,8.49",
        "2026-03-02T00:00:00Z,2026-03-03T00:00:00Z,USD,2,1,9.99",
        "2026-03-03T00:00:00Z,2026-03-04T00:00:00Z,EUR,2,0,8.49",
        "2026-03-03T00:00:00Z,2026-03-04T00:00:00Z,USD,2,0,9.99",
        "2026-03-04T00:00:00Z,2026-03-05T00:00:00Z,USD,2,1,19.98"]
    _, _, counts = read("/v1/analytics", {**DAY_QUERY, "metrics": "new_subscriptions,churned"}, accept="text/csv")
    assert counts.splitlines()[:3] == ["start,end,currency,new_subscriptions,churned",
                                       "2026-03-01T00:00:00Z,2026-03-02T00:00:00Z,,0,0",
                                       "2026-03-02T00:00:00Z,2026-03-03T00:00:00Z,,1,1"]

    for query, field in (({"metrics": "mrr,bogus"}, "metrics"), ({"interval": "year"}, "interval"),
                         ({"environment": "Staging"}, "environment"), ({"store": "amazon"}, "store"),
                         ({"groupBy": "country"}, "groupBy"), ({"from": "yesterday"}, "from")):
        status, _, text = read("/v1/analytics", query)
        assert status == 400 and json.loads(text)["error"].get("field") == field, (query, status, text)
    status, _, text = read("/v1/analytics", {"from": "2026-03-05T00:00:00Z", "to": "2026-03-01T00:00:00Z"})
    assert status == 400, text
    status, _, text = read("/v1/analytics", {"from": "1990-01-01T00:00:00Z", "to": "2026-01-01T00:00:00Z"})
    assert status == 400, "more than 3,700 days: " + text
    status, _, text = read("/v1/analytics/cohorts", {"interval": "day"})
    assert status == 400 and json.loads(text)["error"].get("field") == "interval", text
    assert read("/v1/analytics", key=None)[0] == 401
    assert read("/v1/analytics", key=os.environ.get("CONSOLE_INGEST_KEY", "dev-ingest-key-local"))[0] == 403


def table_rows(console, css):
    return [[cell.text.strip() for cell in row.find_elements(By.CSS_SELECTOR, "td")]
            for row in console.find_all(f"{css} tbody tr")]


def label(start, interval):
    return start[:7] if interval == "month" else start[:10]


def expected_tables(body, interval):
    """The tables the page should show for an answer of GET /v1/analytics."""
    series = body["series"]
    def codes(*metrics):
        return sorted({code for item in series for metric in metrics for code in item["values"][metric]})
    def percent(rate):
        return "—" if rate is None else f"{float(rate) * 100:.2f}%"
    rows = lambda cells: [[label(item["start"], interval)] + cells(item["values"]) for item in series]
    return {
        "#analytics-mrr": rows(lambda v: [v["mrr"].get(code, "—") for code in codes("mrr")]),
        "#analytics-active": rows(lambda v: [str(v[m]) for m in ("active_subscriptions", "active_trials", "new_subscriptions",
                                                                "renewals", "trial_starts", "trial_conversions")]),
        "#analytics-churn": rows(lambda v: [str(v["churned"]), percent(v["churn_rate"])]),
        **{f'#analytics-revenue [data-currency="{code}"]': rows(lambda v, code=code: [
            v["revenue"].get(code, "—"), v["refunds"].get(code, "—"), v["net_revenue"].get(code, "—")])
           for code in codes("revenue", "refunds")},
    }


def assert_tables_match(console, body, interval):
    for css, rows in expected_tables(body, interval).items():
        assert table_rows(console, css) == rows, css


def test_the_analytics_page_draws_what_the_api_answers(console, example):
    driver = console.driver
    console.signed_in()
    console.open(f"#/analytics?from={FROM}&to={THROUGH}")
    console.settled()
    assert console.find("#nav a[aria-current='page']").text == "Analytics"

    # The charts: inline SVG with a line per currency, actives and trials, bars and the rate.
    series = lambda css: {g.get_attribute("data-series") for g in console.find_all(f"{css} svg.chart g.series")}
    assert series("#analytics-mrr") == {"EUR", "USD"}
    assert series("#analytics-active") == {"active subscriptions", "active trials"}
    assert console.find_all("#analytics-churn svg.chart rect.bar.churned")
    assert series("#analytics-churn") == {"churn rate"}
    assert len(console.find_all("#analytics-revenue svg.chart")) == 2  # EUR and USD
    assert console.find_all("#analytics-revenue svg.chart rect.bar.revenue")
    assert console.find_all("#analytics-revenue svg.chart rect.bar.refunds")
    for table in console.find_all("main table"):
        assert table.find_element(By.CSS_SELECTOR, "caption").get_attribute("textContent").strip()

    # Each table holds the numbers GET /v1/analytics answers for the same range.
    day = analytics(DAY_QUERY)
    assert_tables_match(console, day, "day")
    assert day == example
    assert table_rows(console, "#analytics-active")[0] == ["2026-03-01", "2", "1", "0", "0", "0", "0"]

    # The cohorts of the range, as GET /v1/analytics/cohorts answers them (by month for a daily range).
    cohorts = analytics({**DAY_QUERY, "interval": "month"}, "/v1/analytics/cohorts")
    rows = table_rows(console, "#analytics-cohorts")
    assert [[row[0], row[1], row[2], row[3]] + [cell.split(" ")[0] for cell in row[4:4 + len(cohort["retained"])]]
            for row, cohort in zip(rows, cohorts["cohorts"])] == [
        [cohort["start"][:7], str(cohort["size"]), str(cohort["trialStarts"]), str(cohort["trialConversions"])]
        + [str(n) for n in cohort["retained"]] for cohort in cohorts["cohorts"]]
    assert len(rows) == len(cohorts["cohorts"]) == 1

    console.screenshot("analytics-desktop.png", 1280)  # docs/console-analytics.png
    console.screenshot("analytics-phone.png", 390, mobile=True)

    # Another interval re-renders at once, from the API's weekly answer.
    Select(console.find("#analytics-interval")).select_by_value("week")
    console.wait().until(lambda _: "interval=week" in driver.current_url)
    console.wait().until(lambda _: console.find_all("#analytics-active th") and console.find("#analytics-active th").text.lower() == "week of")
    console.settled()
    week = analytics({**DAY_QUERY, "interval": "week"})
    assert [item["start"] for item in week["series"]] == ["2026-02-23T00:00:00Z", "2026-03-02T00:00:00Z"]
    assert_tables_match(console, week, "week")
    Select(console.find("#analytics-interval")).select_by_value("month")
    console.wait().until(lambda _: "interval=month" in driver.current_url)
    console.wait().until(lambda _: console.find("#analytics-active th").text.lower() == "month")
    console.settled()
    assert_tables_match(console, analytics({**DAY_QUERY, "interval": "month"}), "month")

    # Download CSV: the file is the CSV the API answers for the range shown.
    downloads = tempfile.mkdtemp(prefix="analytics-csv-")
    driver.execute_cdp_cmd("Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": downloads})
    console.find("#analytics-download").click()
    console.wait().until(lambda _: "Downloaded" in console.find("#analytics-download-message").text)
    name = f"analytics-{FROM}-to-{THROUGH}-month.csv"
    path = os.path.join(downloads, name)
    console.wait().until(lambda _: os.path.exists(path) and not os.path.exists(path + ".crdownload"))
    _, _, expected = read("/v1/analytics", {**DAY_QUERY, "interval": "month"}, accept="text/csv")
    with open(path, newline="") as file:
        downloaded = file.read()
    shutil.rmtree(downloads, ignore_errors=True)
    assert downloaded == expected

    # A range that ends before it starts is refused on the page, without a request.
    console.open("#/analytics?from=2026-03-05&to=2026-03-01")
    console.wait().until(lambda _: "is after Through" in console.find("#analytics-download-message").text)
    errors = [entry["message"] for entry in console.severe_console_messages() if "Failed to load resource" not in entry["message"]]
    assert errors == []
