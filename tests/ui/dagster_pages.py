"""What the browser tests do in the Dagster UI, one function per thing a data engineer does.

Each reads the page the way a person does -- names on the graph, the run's status badge, the
backfill's counts -- and returns plain data for the test to assert on. Locators prefer roles and
visible text; Dagster's CSS module names are matched by prefix only (their hashes change).
"""

from __future__ import annotations

import re
import time
from pathlib import Path

from playwright.sync_api import Page
from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

from tests.ui.project_parts import ProjectParts

RUN_DONE = ("Success", "Failure", "Canceled")


def shot(page: Page, folder: Path, name: str) -> Path:
    path = folder / f"{name}.png"
    page.screenshot(path=path)
    return path


def wait_for_settled_count(locator, at_least: int = 1, timeout_s: float = 90, settle_s: float = 1.5) -> int:
    """Wait until ``locator`` matches at least ``at_least`` elements and the count stops changing
    (the graph draws its nodes in several passes)."""
    deadline = time.monotonic() + timeout_s
    last, since = -1, time.monotonic()
    while time.monotonic() < deadline:
        count = locator.count()
        if count != last:
            last, since = count, time.monotonic()
        elif count >= at_least and time.monotonic() - since >= settle_s:
            return count
        time.sleep(0.25)
    return last


def asset_names_in_graph(page: Page, url: str) -> set[str]:
    """The global asset lineage graph with every group expanded: the names on its asset nodes."""
    page.goto(f"{url}/asset-groups")
    groups = page.locator("foreignObject")
    wait_for_settled_count(groups)
    page.get_by_role("button", name="settings", exact=True).click()  # the graph's own settings, bottom right
    expand = page.get_by_role("menuitem", name="Expand all groups")
    expand.or_(page.get_by_role("menuitem", name="Collapse all groups")).first.wait_for()
    if expand.count():  # otherwise already expanded
        expand.click()
    page.keyboard.press("Escape")  # close the menu, off the graph
    names = page.locator("foreignObject [class*='AssetNode_assetName']")
    wait_for_settled_count(names, at_least=0)
    return {n.strip() for n in names.all_text_contents()}


def check_names_of_asset(page: Page, url: str, asset: str, expected: set[str], timeout_s: float = 30) -> set[str]:
    """The asset page's Checks tab: which of ``expected`` it lists (none for an asset the UI does not know)."""
    page.goto(f"{url}/assets/{asset}?view=checks")
    count_heading = page.get_by_text(re.compile(r"^Checks \(\d+\)$"))
    count_heading.or_(page.get_by_text("No assets were found")).first.wait_for()
    if not count_heading.count():
        return set()
    listed = int(re.search(r"\d+", count_heading.first.inner_text())[0])
    # The heading comes before the list: wait for as many names as it announces, or give up on the rest.
    deadline = time.monotonic() + timeout_s
    while True:
        found = {name for name in expected if page.get_by_text(name, exact=True).count()}
        if len(found) >= min(listed, len(expected)) or time.monotonic() > deadline:
            return found
        time.sleep(0.25)


def automation_names(page: Page, url: str, kind: str) -> set[str]:
    """The Automation page's sensors or schedules (``kind``: "sensors" | "schedules"), by their links."""
    page.goto(f"{url}/automation")
    links = page.locator(f"a[href*='/{kind}/']")
    wait_for_settled_count(page.locator("a[href*='/sensors/'], a[href*='/schedules/']"))
    return {(a.get_attribute("href") or "").rsplit("/", 1)[1] for a in links.all()}


def job_names(page: Page, url: str) -> set[str]:
    page.goto(f"{url}/jobs")
    links = page.locator("a[href*='/jobs/']")
    wait_for_settled_count(links)
    return {a.strip() for a in links.all_text_contents()}


def parts_missing_from_ui(page: Page, url: str, parts: ProjectParts, screenshots: Path, prefix: str) -> set[str]:
    """Every part of ``parts`` the UI does not show, as ``kind name`` (see ``ProjectParts.names``);
    a screenshot of each page read, named ``<prefix>-...``."""
    shown = {f"asset {a}" for a in asset_names_in_graph(page, url)}
    shot(page, screenshots, f"{prefix}-asset-graph")
    for asset, checks in sorted(parts.checks_by_asset.items()):
        shown |= {f"check {asset}:{c}" for c in check_names_of_asset(page, url, asset, set(checks))}
        shot(page, screenshots, f"{prefix}-checks-{asset}")
    shown |= {f"sensor {s}" for s in automation_names(page, url, "sensors")}
    shown |= {f"schedule {s}" for s in automation_names(page, url, "schedules")}
    shot(page, screenshots, f"{prefix}-automation")
    shown |= {f"job {j}" for j in job_names(page, url)}
    shot(page, screenshots, f"{prefix}-jobs")
    return parts.names() - shown


def launch_job_from_ui(page: Page, url: str, job: str, location: str = "offset_pipeline") -> str:
    """The job's page, "Materialize all", then the toast's "View": the launched run's id."""
    page.goto(f"{url}/locations/{location}/jobs/{job}")
    page.get_by_role("button", name="Materialize all").click()
    toast = page.get_by_text(re.compile(r"^Launched run [0-9a-f]{8}"))
    toast.wait_for()
    page.get_by_role("link", name="View").or_(page.get_by_role("button", name="View")).first.click()
    page.wait_for_url(re.compile(r"/runs/[0-9a-f-]{36}"))
    return page.url.rsplit("/runs/", 1)[1].split("?")[0]


def run_status_shown(page: Page, url: str, run_id: str, timeout_s: float) -> str:
    """Watch the run's page until its status badge says it is done; the status it shows. The page
    is reloaded every few seconds: a live page of a loaded machine can miss an update."""
    page.goto(f"{url}/runs/{run_id}")
    badge = page.get_by_text(re.compile(rf"^({'|'.join(RUN_DONE)})$")).first
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            badge.wait_for(timeout=10_000)
            return badge.inner_text().strip()
        except PlaywrightTimeoutError:
            if time.monotonic() > deadline:
                raise AssertionError(f"run {run_id} not shown done after {timeout_s:.0f}s: "
                                     f"{page.locator('body').inner_text()[-600:]}") from None
            page.reload()


def launch_backfill_from_ui(page: Page, url: str, asset: str, partition_range: str) -> str:
    """The asset's "Materialize…", a partition range typed into the dialog, "Launch backfill": the
    backfill's id, from the toast's "View"."""
    page.goto(f"{url}/assets/{asset}")
    page.get_by_role("button", name="Materialize…").click()
    dialog = page.get_by_role("dialog")
    selection = dialog.get_by_placeholder("No matching partitions")
    selection.fill(partition_range)
    selection.press("Enter")
    dialog.get_by_text("2 partitions", exact=True).wait_for()
    dialog.get_by_role("button", name="Launch backfill").click()
    page.get_by_text(re.compile(r"^Created backfill \w+")).wait_for()
    page.get_by_role("link", name="View").or_(page.get_by_role("button", name="View")).first.click()
    page.wait_for_url(re.compile(r"/runs/b/\w+"))
    return page.url.rsplit("/runs/b/", 1)[1].split("?")[0]


BACKFILL_DONE = ("Succeeded", "Failed", "Canceled", "Completed with failures")


def backfill_outcome_shown(page: Page, url: str, backfill_id: str, asset: str, timeout_s: float) -> dict:
    """Watch the backfill's page until its status is final: that status and the asset's row
    (partitions targeted, in progress, succeeded, failed) as the page shows them."""
    page.goto(f"{url}/runs/b/{backfill_id}")
    row = re.compile(rf"{re.escape(asset)}\n(\d+)% completed\n(\d+)\n(\d+)\n(\d+)\n(\d+)")
    deadline = time.monotonic() + timeout_s
    while True:
        page.get_by_text("Partitions targeted", exact=True).wait_for()
        text = page.locator("body").inner_text()
        status = re.search(r"\nStatus\n(.+)\n", text)
        counts = row.search(text)
        if status and counts and status[1].strip() in BACKFILL_DONE:
            break
        if time.monotonic() > deadline:
            raise AssertionError(f"backfill {backfill_id} not done after {timeout_s:.0f}s: {text[-600:]}")
        page.wait_for_timeout(3000)
        page.reload()
    completed, targeted, in_progress, succeeded, failed = map(int, counts.groups())
    return {"status": status[1].strip(), "completed_pct": completed, "targeted": targeted,
            "in_progress": in_progress, "succeeded": succeeded, "failed": failed}
