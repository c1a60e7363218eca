"""The Usage page (totals, bars, filters), its CSV download, and spend on agent cards and the task page,
through Django's test client on records ingested as the credential proxy writes them."""

import csv
import io
import re
import time

import pytest
from asgiref.sync import async_to_sync
from django.http import StreamingHttpResponse

from agents.models import Agent
from tests.test_ui import in_review, logged_in
from tests.test_usage import line, sandbox
from ui import usage_views
from usage import ingest

pytestmark = pytest.mark.django_db

DAY = 24 * 3600
SONNET_COST = 0.008325  # a line() of claude-sonnet-4-5 by the default prices (tests/test_usage.py)


def body(response: StreamingHttpResponse) -> str:
    """A streamed download, read as the ASGI server reads it."""

    async def read() -> bytes:
        return b"".join([chunk async for chunk in response.streaming_content])

    return async_to_sync(read)().decode()


def chart(page: str, name: str) -> str:
    start = page.index(f'data-chart="{name}"')
    return page[start : page.index("</table>", start)]


def test_the_usage_page_shows_the_totals_and_a_bar_per_model_agent_and_task():
    box = sandbox("build")
    task_id = in_review("count the tokens")
    worker = Agent.objects.create(sandbox=box, profile="shell", task_id=task_id)
    ingest.ingest(
        [line(box.id, worker.id) for _ in range(3)] + [line(box.id, model="gpt-5", provider="openai")]
    )
    client, _plain = logged_in()

    page = client.get("/usage/").content.decode()
    assert '<a href="/usage/" aria-current="page">Usage</a>' in page
    total = page[page.index("data-usage-total") : page.index("</dl>", page.index("data-usage-total"))]
    # 3 x 0.008325 + gpt-5's 0.00125 in, 0.002 out, 0.0005 cache read
    assert '<dd data-field="cost"><strong>0.03 USD</strong></dd>' in total
    assert '<dd data-field="requests">4</dd>' in total
    assert '<dd data-field="inputTokens">4,000</dd>' in total
    assert '<dd data-field="cacheReadTokens">16,000</dd>' in total
    models = chart(page, "models")
    assert re.findall(r'data-bar="([^"]+)"', models) == ["claude-sonnet-4-5", "gpt-5"]
    assert 'style="width: 100.0%"' in models
    assert f'style="width: {0.00375 / (3 * SONNET_COST) * 100:.1f}%"' in models
    assert f'<a href="/agents/{worker.id}/">{worker.id}</a>' in chart(page, "agents")
    assert f'<a href="/tasks/{task_id}/">{task_id}</a>' in chart(page, "tasks")
    assert "(none)" in chart(page, "agents")  # the record no agent made
    assert len(re.findall(r"<tr data-bar=", chart(page, "days"))) == 1


def test_from_and_to_and_the_sandbox_leave_out_the_records_outside():
    box, other = sandbox("build"), sandbox("other")
    ingest.ingest(
        [
            line(box.id, at=time.time() - 40 * DAY),
            line(box.id, at=time.time() - 2 * DAY),
            line(box.id),
            line(other.id, model="gpt-5", provider="openai"),
        ]
    )
    client, _plain = logged_in()

    def requests(query: str) -> str:
        page = client.get(f"/usage/?{query}").content.decode()
        [count] = re.findall(r'<dd data-field="requests">(\d+)</dd>', page)
        return count

    assert requests("") == "3"  # the last 30 days
    today = time.strftime("%Y-%m-%d", time.gmtime())
    long_ago = time.strftime("%Y-%m-%d", time.gmtime(time.time() - 50 * DAY))
    yesterday = time.strftime("%Y-%m-%d", time.gmtime(time.time() - DAY))
    assert requests(f"from={long_ago}") == "4"
    assert requests(f"from={long_ago}&to={yesterday}") == "2"
    assert requests(f"from={today}&to={today}") == "2"
    assert requests(f"from={long_ago}&sandboxId={box.id}") == "3"
    rows = list(csv.DictReader(io.StringIO(body(client.get(f"/usage/export.csv?to={yesterday}")))))
    assert [row["sandboxId"] for row in rows] == [box.id]


def test_the_csv_has_the_wire_names_and_every_record_page_after_page(monkeypatch):
    box = sandbox("build")
    ingest.ingest([line(box.id, at=time.time() - index) for index in range(4)] + [line(box.id, model="=1+1")])
    client, _plain = logged_in()

    response = client.get("/usage/export.csv")
    assert response["Content-Disposition"] == 'attachment; filename="cocoon-usage.csv"'
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    whole = list(csv.reader(io.StringIO(body(response))))
    assert whole[0] == list(usage_views.EXPORT_FIELDS)
    assert len(whole) == 6
    records = [dict(zip(whole[0], row, strict=True)) for row in whole[1:]]
    assert {record["sandboxId"] for record in records} == {box.id}
    assert {record["agentId"] for record in records} == {""}
    assert records[0]["stream"] == "true"
    assert "'=1+1" in {record["model"] for record in records}  # no formula for a spreadsheet

    monkeypatch.setattr(usage_views, "EXPORT_PAGE_SIZE", 2)
    paged = list(csv.reader(io.StringIO(body(client.get("/usage/export.csv")))))
    assert paged == whole


@pytest.mark.usefixtures("docker_client")
def test_an_agent_card_on_the_dashboard_shows_what_its_requests_cost():
    box = sandbox("build")
    spender = Agent.objects.create(sandbox=box, profile="shell")
    thrifty = Agent.objects.create(sandbox=box, profile="shell")
    ingest.ingest([line(box.id, spender.id), line(box.id, spender.id)])
    client, _plain = logged_in()

    page = client.get("/").content.decode()
    card = page[page.index(f'data-agent="{spender.id}"') :]
    card = card[: card.index("</li>")]
    assert 'Spend: <span class="spend">0.02 USD</span>' in card
    other = page[page.index(f'data-agent="{thrifty.id}"') :]
    assert "Spend:" not in other[: other.index("</li>")]


def test_the_task_page_shows_what_its_agents_requests_cost():
    box = sandbox("build")
    task_id = in_review("spend some")
    worker = Agent.objects.create(sandbox=box, profile="shell", task_id=task_id)
    ingest.ingest([line(box.id, worker.id) for _ in range(2)] + [line(box.id)])
    client, _plain = logged_in()

    page = client.get(f"/tasks/{task_id}/").content.decode()
    spend = page[page.index("data-task-spend") : page.index("</dd>", page.index("data-task-spend"))]
    assert "0.02 USD" in spend
    assert "2 requests, 2,000 tokens in, 400 out, 600 cache write, 8,000 cache read" in spend
