"""The administrator's console in a real headless Chromium (Debian's, through
chromium-driver and Selenium), against a live `outpost serve` over 235,613
seeded people and two field devices run with the `outpost` command line.

Run by scripts/browser-test, which installs what is missing. Every wait is
bounded and names what it waited for; a screenshot of every page goes to the
output folder, and the repository's copies (docs/console/) are refreshed.
"""

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid

from selenium import webdriver
from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException, TimeoutException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

PEOPLE = 235_613


class Failure(Exception):
    pass


def step(text):
    print(f"--- {text}", flush=True)


def check(condition, what):
    if not condition:
        raise Failure(what)


class Outpost:
    """The outpost binary: the server, its tokens and field devices' command lines."""

    def __init__(self, binary, folder):
        self.binary = binary
        self.folder = folder
        self.database = os.path.join(folder, "server.sqlite")
        self.server = None
        self.port = None

    def run(self, *words, device=None, check_exit=True, timeout=120):
        env = dict(os.environ)
        if device:
            env["XDG_CONFIG_HOME"] = os.path.join(self.folder, device, "config")
            env["XDG_DATA_HOME"] = os.path.join(self.folder, device, "data")
        done = subprocess.run([self.binary, *words], env=env, capture_output=True, text=True, timeout=timeout)
        if check_exit and done.returncode != 0:
            raise Failure(f"outpost {' '.join(words)} exited {done.returncode}: {done.stderr.strip()} {done.stdout.strip()}")
        return done

    def token(self, user, role, team):
        return self.run("token", "issue", "--user", user, "--role", role, "--team", team,
                        "--database", self.database).stdout.strip().splitlines()[-1]

    def serve(self):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        log = open(os.path.join(self.folder, "server.log"), "w")
        self.server = subprocess.Popen(
            [self.binary, "serve", "--database", self.database, "--port", str(self.port)], stdout=log, stderr=log)
        deadline = time.time() + 60
        while time.time() < deadline:
            try:
                with urllib.request.urlopen(f"{self.url}/v1/health", timeout=2) as answer:
                    if answer.status == 200:
                        return
            except OSError:
                time.sleep(0.1)
        raise Failure("the server never answered /v1/health within 60 s")

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def stop(self):
        if self.server:
            self.server.terminate()
            try:
                self.server.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.server.kill()


def request(url, method="GET", token=None, body=None, headers=None):
    """One HTTP request; returns (status, parsed JSON or None)."""
    data = json.dumps(body).encode() if body is not None else None
    sent = {"Content-Type": "application/json"} if data else {}
    if token:
        sent["Authorization"] = f"Bearer {token}"
    sent.update(headers or {})
    try:
        with urllib.request.urlopen(urllib.request.Request(url, data=data, method=method, headers=sent), timeout=30) as answer:
            return answer.status, json.loads(answer.read() or b"null")
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null")


def browser(language, width=1366, height=900):
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for flag in ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", f"--lang={language}",
                 f"--window-size={width},{height}", "--hide-scrollbars", "--force-device-scale-factor=1"]:
        options.add_argument(flag)
    options.add_experimental_option("prefs", {"intl.accept_languages": language})
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    driver.set_page_load_timeout(30)
    driver.set_script_timeout(30)
    return driver


def wait(driver, what, condition, timeout=20):
    # The page redraws a view whole after each change: an element found a
    # moment before may be gone (stale) when it is read; the wait asks again.
    ignored = [NoSuchElementException, StaleElementReferenceException]
    try:
        return WebDriverWait(driver, timeout, ignored_exceptions=ignored).until(lambda d: condition(d))
    except TimeoutException:
        raise Failure(f"waited {timeout} s for {what}; page: {driver.find_element(By.TAG_NAME, 'main').text[:400]!r}")


def text_of(driver, selector):
    return driver.find_element(By.CSS_SELECTOR, selector).text


class Screens:
    def __init__(self, folder):
        self.folder = folder
        os.makedirs(folder, exist_ok=True)
        self.saved = []

    def take(self, driver, name):
        path = os.path.join(self.folder, f"{name}.png")
        driver.save_screenshot(path)
        self.saved.append(path)


def sign_in(driver, url, token):
    driver.get(f"{url}/admin")
    field = wait(driver, "the sign-in form", lambda d: d.find_element(By.ID, "token"))
    field.clear()
    field.send_keys(token)
    driver.find_element(By.ID, "sign-in").click()


def search(driver, text):
    box = wait(driver, "the search box", lambda d: d.find_element(By.ID, "search-text"))
    box.clear()
    box.send_keys(text)
    driver.find_element(By.ID, "search").click()
    return wait(driver, f"results for {text!r}",
                lambda d: d.find_elements(By.ID, "result-count") and text in d.current_url.replace("%20", " ").replace("+", " ")
                and text_of(d, "#result-count"))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--outpost", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--docs", help="folder whose screenshots are refreshed (the repository's)")
    arguments = parser.parse_args()
    folder = tempfile.mkdtemp(prefix="outpost-console-")
    outpost = Outpost(os.path.abspath(arguments.outpost), folder)
    screens = Screens(arguments.out)
    drivers = []
    try:
        step(f"seeding {PEOPLE:,} people")
        outpost.run("seed", "--people", str(PEOPLE), "--database", outpost.database, timeout=600)
        admin_token = outpost.token("boss", "admin", "hq")
        field_token = outpost.token("ana", "field", "north")
        coordinator_token = outpost.token("carla", "coordinator", "north")
        outpost.serve()
        url = outpost.url

        step("two of Ana's devices capture and edit Mercedes Romero with the command line")
        outpost.run("login", "--server", url, "--token", field_token, device="phone")
        outpost.run("login", "--server", url, "--token", field_token, device="tablet")
        mercedes = outpost.run("add", "people", "name=Mercedes Romero", "phone=555-0101", device="phone").stdout.strip().splitlines()[-1]
        outpost.run("sync", device="phone")
        outpost.run("edit", mercedes, "phone=555-0102", device="phone")
        outpost.run("sync", device="phone")
        outpost.run("sync", device="tablet")
        outpost.run("edit", mercedes, "notes=Second visit: the door is on the side street", device="tablet")
        outpost.run("sync", device="tablet")
        hostile = '<script>window.__xss=1</script><img src=x onerror="window.__xss=2">Hostile Xss'
        outpost.run("add", "people", f"name={hostile}", device="phone")
        outpost.run("sync", device="phone")

        step("an older app on a third device pushes a person without a name")
        old_app = str(uuid.uuid4())
        status, answer = request(f"{url}/v1/push", "POST", field_token, {
            "client_id": old_app, "mutations": [{"seq": 1, "id": str(uuid.uuid4()), "op": "create", "collection": "people",
                                                 "uuid": str(uuid.uuid4()), "data": {"phone": "555-0199"}}]},
            headers={"Outpost-Device": old_app, "Outpost-Client": "org.example.census/1.9", "Outpost-Schema": "2"})
        check(status == 200 and answer["results"][0]["status"] == "rejected", f"the invalid push: {status} {answer}")

        step("sign-in: a field token is refused with a sentence, the admin's is taken")
        driver = browser("en")
        drivers.append(driver)
        driver.get(f"{url}/admin")
        wait(driver, "the sign-in form", lambda d: d.find_elements(By.ID, "token"))
        screens.take(driver, "01-sign-in")
        sign_in(driver, url, coordinator_token)
        refusal = wait(driver, "the refusal", lambda d: d.find_element(By.ID, "message").text)
        check("The console is for administrators" in refusal, f"the refusal says why: {refusal!r}")
        sign_in(driver, url, admin_token)
        wait(driver, "the records page", lambda d: d.find_elements(By.ID, "search-text"))
        cookie = next(c for c in driver.get_cookies() if c["name"] == "outpost_console")
        check(cookie["httpOnly"] and cookie.get("sameSite") == "Strict" and cookie["path"] == "/admin", f"cookie flags: {cookie}")
        check("outpost_console" not in driver.execute_script("return document.cookie"), "the script cannot read the cookie")
        check(f"{PEOPLE + 2:,} records in people" in text_of(driver, "#collection-count"), f"the count of people: {text_of(driver, '#collection-count')!r}")

        step("search Romero among the people, then open Mercedes")
        found = search(driver, "Romero")
        check("50 records found" in found, f"Romero finds a page of people: {found!r}")
        milliseconds = float(found.split(" in ")[1].split(" ")[0].replace(",", ""))
        print(f"    search 'Romero' among {PEOPLE:,}: {milliseconds} ms at the server", flush=True)
        check(milliseconds < 1000, f"the search answers under a second: {milliseconds} ms")
        screens.take(driver, "02-records-search")
        found = search(driver, "Mercedes Romero")
        check("1 record found" in found, f"Mercedes alone: {found!r}")
        driver.find_element(By.CSS_SELECTOR, "a.record-link").click()
        wait(driver, "Mercedes' page", lambda d: d.find_elements(By.ID, "history"))
        check(text_of(driver, "#record-title") == "Mercedes Romero", "the record's title")
        rows = driver.find_elements(By.CSS_SELECTOR, "#history tbody tr")
        check(len(rows) == 3, f"three versions: {[r.text for r in rows]}")
        ops = [row.find_elements(By.TAG_NAME, "td")[1].text for row in rows]
        check(ops == ["Edited", "Edited", "Created"], f"history operations: {ops}")
        clients = {row.find_elements(By.TAG_NAME, "td")[5].text for row in rows}
        check(len(clients) == 2, f"two devices wrote it: {clients}")
        check("Second visit" in text_of(driver, "#record-data"), "the current data")
        check("carla" in text_of(driver, "#readers") and "ana" in text_of(driver, "#readers"), "who can see it")
        screens.take(driver, "03-record-history")

        step("a record holding <script> is shown as text and runs nothing")
        driver.get_log("browser")  # what came before (a refused sign-in's 403 is expected) is set aside
        driver.get(f"{url}/admin#/records?collection=people&q=hostile")
        wait(driver, "the hostile record", lambda d: d.find_elements(By.CSS_SELECTOR, "a.record-link"))
        driver.find_element(By.CSS_SELECTOR, "a.record-link").click()
        wait(driver, "its page", lambda d: d.find_elements(By.ID, "record-title"))
        check(text_of(driver, "#record-title") == hostile, f"the name as written: {text_of(driver, '#record-title')!r}")
        check(driver.execute_script("return window.__xss === undefined"), "no injected script ran")
        check(not driver.find_elements(By.CSS_SELECTOR, "main script, main img[src='x']"), "no element was made from the data")
        # No script error and no policy violation (a blocked inline script would be one).
        logged = driver.get_log("browser")
        severe = [entry for entry in logged if entry["level"] == "SEVERE" and entry.get("source") != "network"]
        refused = [entry for entry in logged if "Content Security Policy" in entry["message"]]
        check(not severe and not refused, f"the browser console stays clean: {severe + refused}")

        step("devices: the old app's device shows its refusal and what blocks it")
        driver.get(f"{url}/admin#/devices")
        row = wait(driver, "the old app's row", lambda d: d.find_elements(By.CSS_SELECTOR, f"tr.device[data-client='{old_app}']"))[0]
        check("1 refused change" in row.text and "org.example.census/1.9" in row.text, f"the old app's row: {row.text!r}")
        devices = driver.find_elements(By.CSS_SELECTOR, "tr.device")
        check(len(devices) >= 3, f"the phone, the tablet and the old app: {len(devices)}")
        screens.take(driver, "04-devices")
        row.find_element(By.TAG_NAME, "a").click()
        problem = wait(driver, "the rejection", lambda d: d.find_elements(By.CSS_SELECTOR, "#problems tr.problem.rejected"))[0]
        check("invalid_field" in problem.text and "555-0199" in problem.text and "name" in problem.text,
              f"code, field errors and the data sent: {problem.text!r}")
        screens.take(driver, "05-problems")

        step("tokens: issue one for Bruno, it syncs; revoke it, the next sync is refused")
        driver.get(f"{url}/admin#/tokens")
        wait(driver, "the issue form", lambda d: d.find_elements(By.ID, "issue-user"))
        driver.find_element(By.ID, "issue-user").send_keys("bruno")
        driver.find_element(By.ID, "issue-team").send_keys("north")
        driver.find_element(By.ID, "issue-submit").click()
        bruno = wait(driver, "the issued token", lambda d: d.find_elements(By.ID, "issued-token") and text_of(d, "#issued-token"))
        status, _ = request(f"{url}/v1/pull", token=bruno)
        check(status == 200, f"Bruno's device syncs: {status}")
        outpost.run("login", "--server", url, "--token", bruno, device="bruno")
        outpost.run("sync", device="bruno")
        screens.take(driver, "06-tokens-issued")
        driver.find_element(By.CSS_SELECTOR, "tr.token[data-user='bruno'] button.revoke").click()
        driver.find_element(By.CSS_SELECTOR, "button.confirm-revoke").click()
        wait(driver, "the revoked state", lambda d: "Revoked" in text_of(d, "tr.token[data-user='bruno'] td.state"))
        status, answer = request(f"{url}/v1/pull", token=bruno)
        check(status == 403 and answer["error"]["code"] == "token_revoked", f"after revocation: {status} {answer}")
        refused = outpost.run("sync", device="bruno", check_exit=False)
        check(refused.returncode != 0 and "withdrawn" in (refused.stdout + refused.stderr),
              f"Bruno's next sync is refused plainly: {refused.returncode} {refused.stdout} {refused.stderr}")
        screens.take(driver, "07-tokens-revoked")

        step("activity: updates without reloading")
        driver.get(f"{url}/admin#/activity")
        wait(driver, "the activity table", lambda d: d.find_elements(By.CSS_SELECTOR, "#activity tbody tr"))
        marker = driver.execute_script("window.__sameDocument = true; return true")
        # The page redraws itself every 2 s: every read of it goes through a wait.
        before = wait(driver, "the newest minute", lambda d: d.find_element(By.CSS_SELECTOR, "#activity tbody tr").text)
        outpost.run("add", "people", "name=Walk-in visitor", device="tablet")
        outpost.run("sync", device="tablet")
        wait(driver, "the new push in the feed", lambda d: d.find_element(By.CSS_SELECTOR, "#activity tbody tr").text != before)
        check(marker and driver.execute_script("return window.__sameDocument === true"), "no reload happened")
        errors = wait(driver, "the last errors", lambda d: text_of(d, "#errors"))
        check("401" in errors or "403" in errors, f"the last errors list Bruno's refusals: {errors!r}")
        screens.take(driver, "08-activity")

        step("a tablet-sized window reads the records page")
        driver.set_window_size(820, 1180)
        driver.get(f"{url}/admin#/records?collection=people&q=Romero")
        wait(driver, "the results on a tablet", lambda d: d.find_elements(By.ID, "results"))
        width = driver.execute_script("return document.documentElement.scrollWidth")
        check(width <= 820, f"no sideways scrolling of the page: {width} px")
        screens.take(driver, "09-records-tablet")

        step("keyboard: the navigation is reachable with Tab")
        driver.set_window_size(1366, 900)
        driver.get(f"{url}/admin#/records")
        driver.refresh()  # a fresh load: focus starts at the document's top, as a person arriving
        wait(driver, "the navigation", lambda d: d.find_elements(By.ID, "nav-devices"))
        body = driver.find_element(By.TAG_NAME, "body")
        reached = set()
        for _ in range(12):
            body.send_keys("\ue004")  # Tab
            reached.add(driver.execute_script("return document.activeElement.id"))
        check({"nav-records", "nav-devices", "nav-tokens"} <= reached, f"Tab reaches the pages: {reached}")

        step("sign out: the session is gone")
        old_cookie = cookie["value"]
        driver.find_element(By.ID, "sign-out").click()
        wait(driver, "the sign-in form again", lambda d: d.find_elements(By.ID, "token"))
        status, _ = request(f"{url}/admin/api/devices", headers={"Cookie": f"outpost_console={old_cookie}"})
        check(status == 401, f"the old cookie after sign-out: {status}")

        step("the same console in Spanish, chosen from the browser")
        spanish = browser("es")
        drivers.append(spanish)
        sign_in(spanish, url, admin_token)
        wait(spanish, "the Spanish navigation", lambda d: d.find_elements(By.ID, "nav-records") and text_of(d, "#nav-records") == "Registros")
        spanish.get(f"{url}/admin#/devices")
        wait(spanish, "the Spanish devices page", lambda d: "Dispositivos" in d.find_element(By.TAG_NAME, "h2").text)
        check("cambio rechazado" in spanish.find_element(By.ID, "devices").text, "states in words, in Spanish")
        screens.take(spanish, "10-devices-es")
    finally:
        for driver in drivers:
            driver.quit()
        outpost.stop()
        shutil.rmtree(folder, ignore_errors=True)
    if arguments.docs:
        os.makedirs(arguments.docs, exist_ok=True)
        for path in screens.saved:
            shutil.copy(path, arguments.docs)
    print(f"console browser test passed; {len(screens.saved)} screenshots in {arguments.out}", flush=True)


if __name__ == "__main__":
    try:
        main()
    except Failure as failure:
        print(f"console browser test FAILED: {failure}", file=sys.stderr, flush=True)
        sys.exit(1)
