"""The web UI in real headless Chromium (Playwright) against a live cocoond on the real Docker driver.

One cocoond and one sandbox serve the whole module. Screenshots of the main pages are written to
test-output/screenshots/ (CI keeps them as artifacts).
"""

import re
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.conftest import ROOT, Cocoond, remove_instance_objects, wait_until

pytestmark = pytest.mark.e2e

SCREENSHOTS = ROOT / "test-output" / "screenshots"


@pytest.fixture(scope="module")
def server(tmp_path_factory, docker_client, sandbox_image) -> Iterator[Cocoond]:
    """A cocoond of its own: no toolbox yet, so the setup checklist is still open."""
    instance = Cocoond(data=tmp_path_factory.mktemp("ui") / "data").start()
    yield instance
    instance.stop()
    remove_instance_objects(docker_client, instance.instance)


# What Chromium refused under the pages' Content-Security-Policy (it says so on the console).
csp_violations: list[str] = []


@pytest.fixture(autouse=True)
def no_csp_violations() -> Iterator[None]:
    yield
    found, csp_violations[:] = list(csp_violations), []
    assert not found


def new_page(browser: Browser, locale: str = "en-US") -> Page:
    context = browser.new_context(locale=locale, viewport={"width": 1280, "height": 860})
    context.grant_permissions(["clipboard-read", "clipboard-write"])
    page = context.new_page()
    page.set_default_timeout(20_000)
    page.on(
        "console",
        lambda message: "Content Security Policy" in message.text and csp_violations.append(message.text),
    )
    return page


def log_in(page: Page, server: Cocoond, token: str) -> None:
    page.goto(f"{server.url}/login")
    page.get_by_label("Token").fill(token)
    # The next page's scripts (modules, run before its load event) must be listening before a test
    # acts on it: under load a select changed before app.js ran reloaded nothing.
    with page.expect_navigation():
        page.get_by_role("button", name="Log in").click()


def snap(page: Page, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=SCREENSHOTS / f"{name}.png", full_page=True)


@pytest.fixture(scope="module")
def admin(browser, server) -> Page:
    page = new_page(browser)
    page.goto(server.url)
    snap(page, "login")
    log_in(page, server, server.token)
    expect(page.locator("#live-state")).to_have_attribute("data-live", "1")
    return page


@pytest.fixture(scope="module")
def sandbox_id(admin, server) -> str:
    """A sandbox created from the form."""
    admin.goto(f"{server.url}/sandboxes/")
    admin.get_by_label("Name").fill("ui-e2e")
    admin.get_by_label("Network", exact=True).select_option("none")
    snap(admin, "sandboxes")
    admin.get_by_role("button", name="Create sandbox").click()
    expect(admin.locator("h1")).to_contain_text("ui-e2e")
    expect(admin.locator("[data-field=state]").first).to_have_text("running")
    return re.search(r"/sandboxes/(sb_[a-z0-9]+)/", admin.url)[1]


def test_login_shows_the_checklist_with_its_fix_buttons(admin, server):
    admin.goto(server.url)
    checklist = admin.locator("[data-checklist]")
    expect(checklist).to_be_visible()
    expect(checklist.locator("[data-check=toolbox] button")).to_have_text("Fix")
    expect(checklist.locator("[data-check=image]")).to_have_class("ok")
    snap(admin, "dashboard")


def test_a_shell_agent_spawned_from_the_form_echoes_in_the_terminal_and_its_card_goes_live(
    admin, server, sandbox_id
):
    admin.goto(f"{server.url}/sandboxes/{sandbox_id}/")
    snap(admin, "sandbox")
    admin.get_by_label("Profile").select_option("shell")
    admin.get_by_role("button", name="Spawn agent").click()
    terminal = admin.locator("#terminal")
    expect(terminal).to_have_attribute("data-connected", "1")
    agent_id = terminal.get_attribute("data-agent-id")
    terminal.click()
    admin.keyboard.type("echo hello-ui\n")
    # the echo of the typed command and its output: two lines with the text
    expect(terminal.locator(".xterm-rows")).to_contain_text(re.compile(r"hello-ui[\s\S]*hello-ui"))

    # The agent's card on the sandbox page, open in a second tab, follows the status over the WebSocket.
    watcher = admin.context.new_page()
    watcher.goto(f"{server.url}/sandboxes/{sandbox_id}/")
    expect(watcher.locator("#live-state")).to_have_attribute("data-live", "1")
    watcher.evaluate("window.notReloaded = true")
    card = watcher.locator(f".card[data-agent={agent_id}]")
    admin.keyboard.type("sleep 5\n")
    expect(card.locator("[data-field=status]")).to_have_text("working", timeout=15_000)
    expect(card).to_have_class(re.compile("status-working"))
    expect(card.locator("[data-field=status]")).to_have_text("idle", timeout=20_000)
    assert watcher.evaluate("window.notReloaded") is True
    watcher.close()
    snap(admin, "agent-terminal")


def test_a_file_edited_in_the_file_browser_shows_in_the_diff(admin, server, sandbox_id):
    server.call("files.write", {"sandboxId": sandbox_id, "path": "notes.txt", "content": "one\n"})
    admin.goto(f"{server.url}/sandboxes/{sandbox_id}/files/")
    admin.get_by_role("link", name="notes.txt", exact=True).click()
    editor = admin.get_by_label("Content")
    expect(editor).to_have_value("one\n")
    editor.fill("one\ntwo-from-ui\n")
    snap(admin, "files")
    admin.get_by_role("button", name="Save").click()
    expect(admin.locator(".messages")).to_contain_text("Saved")
    admin.goto(f"{server.url}/sandboxes/{sandbox_id}/diff/")
    expect(admin.locator("table.numstat")).to_contain_text("notes.txt")
    expect(admin.locator("table.diff tr.add")).to_contain_text(["one", "two-from-ui"])
    snap(admin, "diff")
    admin.get_by_role("link", name="Side by side").click()
    expect(admin.locator("table.diff.split td.add").last).to_have_text("two-from-ui")


def test_files_upload_and_download_from_the_browser(admin, server, sandbox_id):
    admin.goto(f"{server.url}/sandboxes/{sandbox_id}/files/")
    admin.get_by_label("Upload a file here").set_input_files(
        {"name": "up.bin", "mimeType": "application/octet-stream", "buffer": bytes(range(256))}
    )
    admin.get_by_role("button", name="Upload", exact=True).click()
    expect(admin.locator(".messages")).to_contain_text("/workspace/up.bin")
    download = admin.request.get(f"{server.url}/sandboxes/{sandbox_id}/files/?download=/workspace/up.bin")
    assert download.body() == bytes(range(256))
    archive = admin.request.get(f"{server.url}/sandboxes/{sandbox_id}/archive?path=/workspace")
    assert archive.ok
    assert archive.headers["content-type"] == "application/x-tar"


def test_the_settings_pages_open_for_the_admin(admin, server):
    settings_pages = ["", "/tokens", "/secrets", "/providers", "/egress", "/profiles"]
    for path in [*(f"settings{page}" for page in settings_pages), "activity"]:
        admin.goto(f"{server.url}/{path}")
        name = path.strip("/").replace("/", "-")
        expect(admin.locator("h1")).to_be_visible()
        snap(admin, name)


def test_the_language_switch_is_kept_by_the_browser(browser, server):
    page = new_page(browser)
    log_in(page, server, server.token)
    with page.expect_navigation():  # the switch reloads the page
        page.get_by_label("Language").select_option("de")
    expect(page.locator("nav[aria-label=Hauptmenü]")).to_contain_text("Einstellungen")
    expect(page.locator("[data-checklist] h2")).to_have_text("Einrichtung")
    page.reload()
    expect(page.locator("html")).to_have_attribute("lang", "de")
    expect(page.locator("[data-checklist] h2")).to_have_text("Einrichtung")
    snap(page, "dashboard-de")
    page.context.close()


def test_an_agent_token_gets_403_pages_for_settings_secrets_and_tokens(browser, server):
    token = server.call("tokens.create", {"name": "ui-agent", "scope": "agent"})["token"]
    page = new_page(browser)
    log_in(page, server, token)
    expect(page.get_by_role("link", name="Settings")).to_have_count(0)
    for path in ("settings/", "settings/secrets", "settings/tokens"):
        response = page.goto(f"{server.url}/{path}")
        assert response.status == 403
        expect(page.locator("h1")).to_have_text("Not allowed")
    snap(page, "forbidden")
    page.context.close()


def denied_hosts(server, sandbox) -> set[str]:
    return {row["host"] for row in server.call("egress.denied", {"sandboxId": sandbox["id"]})}


def test_a_denied_egress_attempt_is_allowed_with_one_click(admin, server, sandbox_image):
    sandbox = server.call("sandbox.create", {"network": "egress", "image": sandbox_image})
    try:
        curl = ["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", "http://denied-ui.invalid/"]
        attempt = server.call("sandbox.exec", {"sandboxId": sandbox["id"], "command": curl})
        assert attempt["stdout"] == "403"
        before = server.call("egress.status")["policyVersion"]
        # The proxy writes what it denied once a second (folded); the page shows what has arrived.
        wait_until(lambda: denied_hosts(server, sandbox) & {"denied-ui.invalid"}, timeout=10)

        admin.goto(f"{server.url}/settings/egress")
        row = admin.locator("tr[data-denied-host='denied-ui.invalid']")
        expect(row).to_be_visible()
        snap(admin, "egress-denied")
        row.get_by_role("button", name="Allow denied-ui.invalid").click()

        expect(admin.locator("tr[data-denied-host='denied-ui.invalid']")).to_have_count(0)
        egress = server.call("settings.get")["egress"]
        assert "denied-ui.invalid" in egress["allowlist"], egress
        status = server.call("egress.status")
        assert status["policyVersion"] > before
        assert status["acknowledgedVersion"] == status["policyVersion"]
    finally:
        server.post("sandbox.delete", {"sandboxId": sandbox["id"]})


def test_a_schedule_form_previews_the_next_runs_as_one_types(admin, server):
    admin.goto(f"{server.url}/schedules/new")
    admin.get_by_label("Name").fill("ui nightly")
    admin.get_by_label("Timezone").fill("Europe/Berlin")
    cron = admin.get_by_label("Cron expression")
    cron.fill("0 2 * *")
    expect(admin.locator("[data-preview-error]")).to_contain_text("Not a valid cron expression")
    expect(cron).to_have_attribute("aria-invalid", "true")
    cron.fill("0 2 * * *")
    items = admin.locator("[data-preview-list] li")
    expect(items).to_have_count(5)
    expect(items.first).to_contain_text(re.compile(r"02:00 \+0[12]:00"))
    expect(admin.locator("[data-preview-error]")).to_have_text("")
    admin.get_by_label("Prompt", exact=True).fill("nightly work")
    admin.get_by_label("Profile").first.select_option("shell")
    snap(admin, "schedule-form")
    admin.get_by_role("button", name="Create schedule").click()
    expect(admin.locator("h1")).to_contain_text("ui nightly")
    expect(admin.locator("[data-preview-list] li")).to_have_count(5)  # rendered by the server too
    assert any(entry["name"] == "ui nightly" for entry in server.call("schedule.list"))


def test_a_task_created_over_the_api_joins_the_list_and_finishes_live(admin, server):
    admin.goto(f"{server.url}/tasks/")
    expect(admin.locator("#live-state")).to_have_attribute("data-live", "1")
    admin.evaluate("window.notReloaded = true")
    report = '{"ok": true, "summary": "from the ui test", "autoClose": true}'
    step = {
        "profile": "shell",
        "prompt": f"echo ui > ui.txt; printf '%s' '{report}' > \"$COCOON_REPORT_FILE\"; exit",
    }
    task = server.call(
        "task.create",
        {"prompt": "ui test", "sandbox": {"network": "none"}, "workflow": [step | {"timeoutS": 60}]},
    )
    row = admin.locator(f"tr[data-task={task['id']}]")
    expect(row.locator("[data-field=status]")).to_have_text("done", timeout=90_000)
    expect(row.locator("[data-field=progress]")).to_have_text("1/1")
    assert admin.evaluate("window.notReloaded") is True
    snap(admin, "tasks")
    row.get_by_role("link", name="ui test").click()
    expect(admin.locator("[data-report-summary]")).to_have_text("from the ui test")
    expect(admin.locator("[data-step='0'] [data-field=status]")).to_have_text("done")
    expect(admin.locator(".file-diff")).to_contain_text("ui.txt")
    snap(admin, "task")


def test_a_sandbox_page_offers_start_or_stop_as_its_state_changes_live(admin, server, sandbox_id):
    """Issue #37: the buttons fit the state, and follow it without a reload."""
    admin.goto(f"{server.url}/sandboxes/{sandbox_id}/")
    expect(admin.locator("#live-state")).to_have_attribute("data-live", "1")
    start, stop = (admin.get_by_role("button", name=name, exact=True) for name in ("Start", "Stop"))
    expect(stop).to_be_visible()
    expect(start).to_be_hidden()
    admin.evaluate("window.notReloaded = true")
    server.call("sandbox.stop", {"sandboxId": sandbox_id})
    expect(start).to_be_visible()
    expect(stop).to_be_hidden()
    server.call("sandbox.start", {"sandboxId": sandbox_id})
    expect(stop).to_be_visible()
    expect(start).to_be_hidden()
    assert admin.evaluate("window.notReloaded") is True


def test_names_search_and_a_refused_form_in_the_browser(admin, server, sandbox_id):
    """Issue #37: an agent is renamed from its page and found by its name, a list narrows to what the
    search asks, and a refused create comes back with what was typed."""
    agent = server.call("agent.spawn", {"sandboxId": sandbox_id, "profile": "shell", "name": "first try"})
    admin.goto(f"{server.url}/agents/{agent['id']}/")
    admin.locator("#ag-name").fill("release notes")
    admin.get_by_role("button", name="Rename").click()
    expect(admin.locator(".messages")).to_contain_text("Renamed.")
    expect(admin.locator('h1 [data-field="name"]')).to_have_text("release notes")

    admin.goto(f"{server.url}/agents/")
    admin.get_by_role("searchbox", name="Search").fill("RELEASE")
    admin.get_by_role("button", name="Filter").click()
    cards = admin.locator("ul.cards > li.card")
    expect(cards).to_have_count(1)
    expect(cards.first.locator('[data-field="name"]')).to_have_text("release notes")
    expect(cards.first.locator('[data-field="status"]')).to_have_attribute("title", re.compile(r"^[a-z]+$"))

    admin.goto(f"{server.url}/sandboxes/")
    admin.get_by_label("Name", exact=True).fill("ui-e2e")  # taken: the module's sandbox
    admin.get_by_label("Repository URL").fill("https://forge.invalid/kept.git")
    admin.get_by_label("Network", exact=True).select_option("none")
    admin.get_by_role("button", name="Create sandbox").click()
    expect(admin.locator("#form-errors")).to_contain_text("ui-e2e")
    expect(admin.get_by_label("Repository URL")).to_have_value("https://forge.invalid/kept.git")
    expect(admin.get_by_label("Name", exact=True)).to_have_value("ui-e2e")
    server.call("agent.kill", {"agentId": agent["id"]})


def test_a_spawn_whose_profile_has_no_provider_key_says_so_on_the_agents_page(admin, server, sandbox_id):
    """Issue #37: a spawn's warnings (agent.spawn's result) reach the person who clicked, on the agent's
    page; this server has no provider key."""
    admin.goto(f"{server.url}/sandboxes/{sandbox_id}/")
    admin.get_by_label("Profile").select_option("claude-code")
    admin.get_by_role("button", name="Spawn agent").click()
    admin.wait_for_url(re.compile(r"/agents/ag_[a-z0-9]+/"))
    expect(admin.locator(".messages")).to_contain_text("No provider has a key for profile claude-code")
    server.call("agent.kill", {"agentId": admin.url.rstrip("/").rsplit("/", 1)[-1]})
