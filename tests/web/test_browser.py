"""The pages in a real browser (Debian's chromium through chromium-driver, headless): sign in, ask,
see each answer's chart with its error bars and a refusal with its code; the owner's charts; and
no Content-Security-Policy violation on the way. One browser and one server for the module."""

from __future__ import annotations

import shutil
import tempfile

import pytest

import dpgate
from conftest import REQUIRE_TOOLS, system_tool
from webserver import OWNER_PASSWORD, PASSWORD, ThreadWeb, add_logins

try:
    import selenium  # noqa: F401 - the test extra installs it
except ImportError:  # pragma: no cover
    if REQUIRE_TOOLS:
        raise
    pytest.skip("selenium is not installed (pip install '.[test]')", allow_module_level=True)
from selenium import webdriver  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

#: How chromium is started: headless, and reaching for nothing outside this machine.
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--window-size=1400,1000")  # fmt: skip
RACE = ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.5) race, COUNT(*) AS n, AVG(hours_per_week) AS hours "
        "FROM adult GROUP BY race ORDER BY n DESC")  # fmt: skip


@pytest.fixture(scope="module")
def web(demo_template, tmp_path_factory):
    path = tmp_path_factory.mktemp("web") / "demo.duckdb"
    shutil.copy(demo_template, path)
    with dpgate.connect(str(path), analyst="demo") as con:  # releases for the owner's page
        cur = con.cursor()
        cur.execute("CREATE SYNTHETIC TABLE adult_syn FROM adult USING mst WITH (epsilon = 1, "
                    "columns = 'age, sex, race, income')")  # fmt: skip
        cur.execute("CREATE SYNTHETIC TABLE cities_tree FROM cities USING privtree WITH (epsilon = 0.5, "
                    "columns = 'lon, lat')")  # fmt: skip
    add_logins(path, ["demo"])
    server = ThreadWeb(path)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def browser(web):
    chromium = system_tool("chromium", "chromium")
    driver_path = system_tool("chromedriver", "chromium-driver")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    profile = tempfile.mkdtemp(prefix="dpgate-chromium-")
    for flag in (*CHROMIUM_FLAGS, f"--user-data-dir={profile}"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    driver.implicitly_wait(0)
    yield driver
    driver.quit()
    shutil.rmtree(profile, ignore_errors=True)


def wait(driver, condition, seconds: float = 20):
    return WebDriverWait(driver, seconds).until(condition)


def sign_in(driver, url: str, name: str, password: str, section: str) -> None:
    driver.delete_all_cookies()
    driver.get(url)
    wait(driver, lambda d: d.find_element(By.ID, "signin-name").is_displayed())
    driver.find_element(By.ID, "signin-name").send_keys(name)
    driver.find_element(By.ID, "signin-password").send_keys(password)
    driver.find_element(By.ID, "signin-button").click()
    wait(driver, lambda d: d.find_element(By.ID, section).is_displayed())


def run(driver, sql: str):
    box = driver.find_element(By.ID, "sql")
    box.clear()
    box.send_keys(sql)
    before = len(driver.find_elements(By.CSS_SELECTOR, "#answers .answer"))
    driver.find_element(By.ID, "run").click()
    wait(driver, lambda d: len(d.find_elements(By.CSS_SELECTOR, "#answers .answer")) > before)
    return driver.find_elements(By.CSS_SELECTOR, "#answers .answer")[0]


def count(node, css: str) -> int:
    """How many elements match, counted in the page (thousands of leaves as WebElements take seconds)."""
    return node.parent.execute_script("return arguments[0].querySelectorAll(arguments[1]).length", node, css)


def test_a_wrong_password_says_so_on_the_page(browser, web):
    browser.delete_all_cookies()
    browser.get(web.url)
    wait(browser, lambda d: d.find_element(By.ID, "signin-name").is_displayed())
    browser.find_element(By.ID, "signin-name").send_keys("demo")
    browser.find_element(By.ID, "signin-password").send_keys("not the password")
    browser.find_element(By.ID, "signin-button").click()
    box = wait(browser, lambda d: d.find_element(By.ID, "signin-error") if d.find_element(By.ID, "signin-error").is_displayed() else None)
    assert "DP712" in box.text
    assert not browser.find_element(By.ID, "analyst").is_displayed()


def test_an_answer_is_a_chart_with_error_bars_a_table_and_its_cost(browser, web):
    sign_in(browser, web.url, "demo", PASSWORD, "analyst")
    card = run(browser, RACE)
    # two noisy columns (n, hours): two charts; each of the five races a bar or a point with a whisker
    figures = card.find_elements(By.CSS_SELECTOR, ".figures > *")
    assert len(figures) == 2
    whiskers = card.find_elements(By.CSS_SELECTOR, "g.dp-whisker line")
    assert len(whiskers) == 2 * 5
    for w in whiskers:  # a whisker spans its interval: it has a length on the page
        x1, x2 = float(w.get_attribute("x1")), float(w.get_attribute("x2"))
        assert x2 > x1
    assert count(card, "g.dp-bar rect") == 5  # counts reach down to zero: bars
    rows = card.find_elements(By.CSS_SELECTOR, "table.data tbody tr")
    assert len(rows) == 5 and "[" in rows[0].text
    text = card.text
    assert "cost: ε 0.5" in text and "population: all 32,561 subjects" in text
    # the fixture's two releases cost ε 1.5 of the demo's 10; this answer 0.5 more
    budget = wait(browser, lambda d: d.find_element(By.ID, "budget") if "ε 8 left" in d.find_element(By.ID, "budget").text else None)
    assert "left of 10" in budget.text
    history = wait(browser, lambda d: d.find_element(By.ID, "history") if "race" in d.find_element(By.ID, "history").text else None)
    assert "0.5" in history.text


def test_a_refusal_shows_its_code_and_hint(browser, web):
    sign_in(browser, web.url, "demo", PASSWORD, "analyst")
    card = run(browser, "SELECT age FROM adult LIMIT 3")
    refusal = card.find_element(By.CSS_SELECTOR, ".refusal")
    assert "DP211" in refusal.text and "hint:" in refusal.text
    assert count(card, "svg") == 0


def test_the_owner_sees_spending_histograms_quality_and_leaves(browser, web):
    sign_in(browser, web.url, "boss", OWNER_PASSWORD, "owner")
    wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#spending g.dp-spending path"))
    owner = browser.find_element(By.ID, "owner")
    assert count(owner, "#histograms svg") == 5  # adult, basket_flags, baskets, careers, cities
    assert count(owner, "#histograms g.dp-bin rect") >= 5
    releases = {r.get_attribute("data-name"): r for r in owner.find_elements(By.CSS_SELECTOR, ".release")}
    assert set(releases) == {"adult_syn", "cities_tree"}
    releases["adult_syn"].find_element(By.CSS_SELECTOR, "button[data-report=quality]").click()
    wait(browser, lambda d: count(releases["adult_syn"], "g.dp-tvd rect") == 3)
    releases["cities_tree"].find_element(By.CSS_SELECTOR, "button[data-report=leaves]").click()
    wait(browser, lambda d: count(releases["cities_tree"], "g.dp-leaf rect") > 50)
    leaves = releases["cities_tree"].text
    assert "leaves" in leaves
    # the synopsis holds every node of its tree; the map draws its leaves only, each once
    drawn = count(releases["cities_tree"], "g.dp-leaf rect")
    assert f"{drawn:,} leaves" in leaves, (drawn, leaves)


def test_no_content_security_policy_violation_was_reported(browser):
    # every script and style came from the package; the console reports any blocked one
    blocked = [e["message"] for e in browser.get_log("browser") if "Content Security Policy" in e["message"]]
    assert blocked == []
