"""Tasks and schedules (SPEC §7): real sandboxes, shell agents doing real work, a clock of the test's own.

The RPC tests run against a live cocoond, whose embedded Celery worker drives the runs. The schedule
tests call the tick with a `now` of their own in this process, and drive runs with the same function
the Celery task calls, so minutes pass without sleeping.
"""

import json
import time
from datetime import UTC, datetime, timedelta

import pytest

from cocoon.actors import SYSTEM_ACTOR
from tests.conftest import wait_until
from tests.test_workspace import git, github  # noqa: F401 - the stand-in GitHub fixture

REPORT = (
    'printf \'%s\' \'{"ok": OK, "summary": "SUMMARY", "autoClose": CLOSE}\' > "$COCOON_REPORT_FILE"; exit'
)


def report_step(ok=True, close=True, summary="all good"):
    command = REPORT.replace("OK", json.dumps(ok)).replace("CLOSE", json.dumps(close))
    return {"profile": "shell", "prompt": command.replace("SUMMARY", summary), "timeoutS": 60}


def shell_task(*steps, **extra):
    return {"prompt": "test task", "sandbox": {"network": "none"}, "workflow": list(steps), **extra}


def settled(cocoond, task_id, timeout=90):
    """The task once it has left queued/running."""

    def check():
        task = cocoond.call("task.get", {"taskId": task_id})
        return task if task["status"] not in {"queued", "running"} else None

    return wait_until(check, timeout=timeout, interval=0.5)


def error_of(response):
    assert response.status_code >= 400, response.text
    return response.json()["error"]


# -- tasks over RPC ------------------------------------------------------------------------------------


def test_a_two_step_workflow_ends_done_with_its_sandbox_gone_and_the_diff_kept(cocoond, sandbox_image):
    write = {"profile": "shell", "prompt": "echo hello from step {{step}} > greeting.txt; exit"}
    task = cocoond.call("task.create", shell_task(write, report_step()))
    assert task["id"].startswith("tk_")
    assert task["status"] == "queued"

    done = settled(cocoond, task["id"])
    assert done["status"] == "done", done
    assert done["report"] == {"ok": True, "summary": "all good", "autoClose": True}
    assert [step["status"] for step in done["steps"]] == ["done", "done"]
    assert len(set(done["agentIds"])) == 2
    assert [entry["path"] for entry in done["diff"]["files"]] == ["greeting.txt"]
    assert "+hello from step 1" in done["diff"]["patch"]
    assert ".cocoon" not in done["diff"]["patch"]  # the report is not part of the work
    sandboxes = {sandbox["id"] for sandbox in cocoond.call("sandbox.list")}
    assert done["sandboxId"] not in sandboxes
    listed = cocoond.call("task.list", {"status": ["done"]})
    assert done["id"] in [entry["id"] for entry in listed]
    assert all("patch" not in (entry["diff"] or {}) for entry in listed)


def test_a_failed_report_goes_to_review_with_a_notification_and_approve_closes_it(cocoond, sandbox_image):
    with cocoond.ws() as ws:
        ws.call("events.subscribe", {"types": ["task.updated", "activity"]})
        task = cocoond.call(
            "task.create",
            shell_task(report_step(ok=False, close=True, summary="tests fail"), title="review me"),
        )
        review = settled(cocoond, task["id"])
        assert review["status"] == "review", review
        assert review["sandboxId"] in {sandbox["id"] for sandbox in cocoond.call("sandbox.list")}

        seen = []
        while not any(e["type"] == "activity" and e["data"]["key"] == "task.review" for e in seen):
            seen.append(ws.next_event(timeout=10)["event"])
        notification = next(e for e in seen if e["type"] == "activity" and e["data"]["key"] == "task.review")
        assert notification["data"]["params"] == {"task": task["id"], "summary": "tests fail"}
        assert "needs a review" in notification["data"]["message"]
        statuses = [e["data"]["status"] for e in seen if e["type"] == "task.updated"]
        assert statuses[-1] == "review"

    approved = cocoond.call("task.approve", {"taskId": task["id"]})
    assert approved["status"] == "done"
    assert review["sandboxId"] not in {sandbox["id"] for sandbox in cocoond.call("sandbox.list")}
    again = cocoond.post("task.approve", {"taskId": task["id"]})
    assert error_of(again)["code"] == "conflict"


def test_reject_closes_a_task_in_review(cocoond, sandbox_image):
    task = cocoond.call("task.create", shell_task(report_step(ok=True, close=False)))
    assert settled(cocoond, task["id"])["status"] == "review"
    rejected = cocoond.call("task.reject", {"taskId": task["id"]})
    assert (rejected["status"], rejected["reasonCode"]) == ("cancelled", "rejected")
    assert rejected["finishedAt"] is not None


def shell(prompt, **extra):
    return {"profile": "shell", "prompt": prompt, **extra}


@pytest.mark.parametrize(
    ("step", "code", "text", "step_status"),
    [
        (shell("echo not json > $COCOON_REPORT_FILE; exit"), "report_not_json", "not valid JSON", "done"),
        (shell("echo '{\"ok\": 1}' > $COCOON_REPORT_FILE; exit"), "report_invalid", "schema", "done"),
        (shell("exit"), "no_report", "wrote no report", "done"),
        (shell("exit 7"), "step_exit", "exited with code 7", "failed"),
        (shell("sleep 60", timeoutS=3), "step_timeout", "within 3 s", "failed"),
    ],
)
def test_a_run_that_goes_wrong_ends_failed_with_the_reason(
    cocoond, sandbox_image, step, code, text, step_status
):
    task = cocoond.call("task.create", shell_task(step))
    failed = settled(cocoond, task["id"])
    assert (failed["status"], failed["reasonCode"]) == ("failed", code), failed
    assert text in failed["reason"]
    assert failed["steps"][0]["status"] == step_status
    assert failed["sandboxId"] in {sandbox["id"] for sandbox in cocoond.call("sandbox.list")}  # for a look
    cocoond.call("sandbox.delete", {"sandboxId": failed["sandboxId"]})


FIXABLE = shell("test -e fixed || exit 7; " + REPORT.replace("OK", "true").replace("CLOSE", "true"))


def test_a_failed_task_is_retried_from_its_failed_step_in_the_same_sandbox(cocoond, sandbox_image):
    """Issue #37: task.retry reruns a failed task from the step that failed, after a fix in its sandbox."""
    once = shell("echo ran >> log.txt; exit")
    task = cocoond.call("task.create", shell_task(once, FIXABLE))
    failed = settled(cocoond, task["id"])
    assert (failed["status"], failed["reasonCode"], failed["currentStep"]) == ("failed", "step_exit", 1)
    assert failed["sandboxKeptUntil"] is not None
    cocoond.call("files.write", {"sandboxId": failed["sandboxId"], "path": "fixed", "content": ""})

    retried = cocoond.call("task.retry", {"taskId": task["id"]})
    assert (retried["status"], retried["reason"]) == ("queued", None)
    assert [step["status"] for step in retried["steps"]] == ["done", "pending"]
    done = settled(cocoond, task["id"])
    assert done["status"] == "done", done
    assert done["steps"][0]["agentId"] == failed["steps"][0]["agentId"]  # step 1 did not run again
    assert done["steps"][1]["agentId"] != failed["steps"][1]["agentId"]
    assert done["diff"]["patch"].count("+ran") == 1
    again = cocoond.post("task.retry", {"taskId": task["id"]})
    assert error_of(again)["code"] == "conflict"
    assert "only a failed task" in error_of(again)["message"]


def test_with_no_hours_to_keep_a_failed_sandbox_goes_at_once_and_a_retry_starts_over(cocoond, sandbox_image):
    cocoond.call("settings.update", {"tasks": {"keepFailedSandboxHours": 0}})
    try:
        task = cocoond.call("task.create", shell_task(shell("echo ran >> log.txt; exit"), FIXABLE))
        failed = settled(cocoond, task["id"])
        assert failed["status"] == "failed"
        assert failed["sandboxId"] not in {sandbox["id"] for sandbox in cocoond.call("sandbox.list")}
        # Its earlier steps' work went with the sandbox: the retry starts over in a new one, where the
        # fix is not, so it fails the same way, from step 1 this time.
        retried = cocoond.call("task.retry", {"taskId": task["id"]})
        assert (retried["sandboxId"], retried["currentStep"]) == (None, 0)
        assert [step["status"] for step in retried["steps"]] == ["pending", "pending"]
        again = settled(cocoond, task["id"])
        assert (again["status"], again["reasonCode"]) == ("failed", "step_exit")
        assert again["sandboxId"] not in (None, failed["sandboxId"])
        assert again["steps"][0]["agentId"] != failed["steps"][0]["agentId"]
    finally:
        cocoond.call("settings.reset", {"keys": ["tasks"]})


def test_cancel_stops_a_running_task_and_its_agent(cocoond, sandbox_image):
    task = cocoond.call("task.create", shell_task({"profile": "shell", "prompt": "sleep 300"}))
    running = wait_until(
        lambda: (t := cocoond.call("task.get", {"taskId": task["id"]}))["agentIds"] and t, timeout=60
    )
    cancelled = cocoond.call("task.cancel", {"taskId": task["id"]})
    assert (cancelled["status"], cancelled["reasonCode"]) == ("cancelled", "cancelled")
    agent = cocoond.call("agent.get", {"agentId": running["agentIds"][0]})
    assert agent["status"] == "exited"
    assert error_of(cocoond.post("task.cancel", {"taskId": task["id"]}))["code"] == "conflict"
    cocoond.call("sandbox.delete", {"sandboxId": running["sandboxId"]})


def with_step(**step):
    return {"prompt": "x", "workflow": [{"profile": "shell"} | step]}


def schedule(**fields):
    return {"name": "bad", "cron": "@daily", "template": {"prompt": "x"}} | fields


@pytest.mark.parametrize(
    ("method", "params", "path", "code"),
    [
        ("task.create", with_step(profile="nope"), "workflow.0.profile", "unknown_profile"),
        ("task.create", with_step(prompt="{{nope}}"), "workflow.0.prompt", "unknown_placeholder"),
        ("task.create", with_step(providers=["ghost"]), "workflow.0.providers.0", "unknown_provider"),
        ("task.create", {"prompt": "x", "sandboxId": "sb_x", "sandbox": {}}, "sandbox", "conflict"),
        ("task.create", {"prompt": ""}, "prompt", "minLength"),
        ("schedule.create", schedule(cron="61 * * * *"), "cron", "invalid_cron"),
        ("schedule.create", schedule(cron="* * *"), "cron", "invalid_cron"),
        ("schedule.create", schedule(timezone="Mars/Olympus"), "timezone", "unknown_timezone"),
        ("schedule.create", schedule(template=with_step(profile="x")), "template.workflow.0.profile",
         "unknown_profile"),
        ("schedule.preview", {"cron": "0 0 30 2 *"}, "cron", "invalid_cron"),
        ("schedule.preview", {}, "cron", "required"),
    ],
)  # fmt: skip
def test_bad_input_gets_a_clear_error_and_leaves_nothing_behind(cocoond, method, params, path, code):
    tasks_before = len(cocoond.call("task.list"))
    error = error_of(cocoond.post(method, params))
    assert error["code"] == "invalid_params"
    assert [(field["path"], field["code"]) for field in error["details"]["fields"]] == [(path, code)]
    assert len(cocoond.call("task.list")) == tasks_before
    assert "bad" not in [schedule["name"] for schedule in cocoond.call("schedule.list")]


def test_errors_are_translated(cocoond):
    response = cocoond.post(
        "schedule.create", schedule(timezone="Mars/Olympus"), headers={"x-cocoon-lang": "de"}
    )
    assert error_of(response)["details"]["fields"][0]["message"] == "Unbekannte Zeitzone Mars/Olympus."
    missing = cocoond.post("task.get", {"taskId": "tk_nothere"}, headers={"x-cocoon-lang": "de"})
    assert error_of(missing) == {
        "code": "not_found",
        "message": "Die Aufgabe tk_nothere existiert nicht.",
        "details": {},
    }


# -- schedules over RPC --------------------------------------------------------------------------------


def test_preview_of_a_nightly_run_in_berlin_across_both_dst_changes(cocoond):
    spring = cocoond.call(
        "schedule.preview",
        {"cron": "0 2 * * *", "timezone": "Europe/Berlin", "count": 3, "after": "2025-03-29T12:00:00Z"},
    )
    # 02:00 does not exist on 30 March: the run comes right after the jump, at 03:00 CEST.
    assert spring["times"] == [
        "2025-03-30T03:00:00+02:00",
        "2025-03-31T02:00:00+02:00",
        "2025-04-01T02:00:00+02:00",
    ]
    autumn = cocoond.call(
        "schedule.preview",
        {"cron": "0 2 * * *", "timezone": "Europe/Berlin", "count": 3, "after": "2025-10-25T12:00:00Z"},
    )
    # 02:00 happens twice on 26 October: a nightly job runs once.
    assert autumn["times"] == [
        "2025-10-26T02:00:00+02:00",
        "2025-10-27T02:00:00+01:00",
        "2025-10-28T02:00:00+01:00",
    ]
    instants = [datetime.fromisoformat(t).astimezone(UTC).isoformat() for t in autumn["times"]]
    assert instants[:2] == ["2025-10-26T00:00:00+00:00", "2025-10-27T01:00:00+00:00"]


def test_schedule_crud_run_and_events(cocoond, sandbox_image):
    template = shell_task(report_step(ok=True, close=False))
    with cocoond.ws() as ws:
        ws.call("events.subscribe", {"types": ["schedule.updated", "schedule.deleted"]})
        created = cocoond.call(
            "schedule.create",
            {"name": "nightly", "cron": "@daily", "timezone": "Europe/Berlin", "template": template},
        )
        assert (created["cron"], created["overlap"], created["keepRuns"]) == ("0 0 * * *", "skip", 10)
        assert datetime.fromisoformat(created["nextRunAt"]) > datetime.now(UTC)
        assert ws.next_event()["event"]["data"]["id"] == created["id"]
        duplicate = cocoond.post(
            "schedule.create", {"name": "nightly", "cron": "@daily", "template": template}
        )
        assert error_of(duplicate)["code"] == "conflict"

        preview = cocoond.call("schedule.preview", {"scheduleId": created["id"], "count": 2})
        assert (
            preview["times"][0]
            == datetime.fromisoformat(created["nextRunAt"])
            .astimezone(datetime.fromisoformat(preview["times"][0]).tzinfo)
            .isoformat()
        )

        updated = cocoond.call("schedule.update", {"scheduleId": created["id"], "enabled": False})
        assert (updated["enabled"], updated["nextRunAt"]) == (False, None)
        assert ws.next_event()["event"]["data"]["enabled"] is False

        run = cocoond.call("schedule.run", {"scheduleId": created["id"]})
        assert run["scheduleId"] == created["id"]
        assert error_of(cocoond.post("schedule.run", {"scheduleId": created["id"]}))["code"] == "conflict"
        reviewed = settled(cocoond, run["id"])
        assert reviewed["status"] == "review"
        assert [t["id"] for t in cocoond.call("task.list", {"scheduleId": created["id"]})] == [run["id"]]

        cocoond.call("schedule.delete", {"scheduleId": created["id"]})
        event = ws.next_event()["event"]
        while event["type"] != "schedule.deleted":
            event = ws.next_event()["event"]
        assert event["data"] == {"id": created["id"]}
    assert error_of(cocoond.post("schedule.get", {"scheduleId": created["id"]}))["code"] == "not_found"
    assert cocoond.call("task.get", {"taskId": run["id"]})["scheduleId"] is None  # the run stays
    cocoond.call("task.reject", {"taskId": run["id"]})
    cocoond.call("sandbox.delete", {"sandboxId": reviewed["sandboxId"]})


# -- a worker that dies mid-run ----------------------------------------------------------------------------


def test_a_run_whose_cocoond_dies_mid_step_is_resumed_after_the_restart(start_cocoond, sandbox_image):
    instance = start_cocoond()
    slow = {"profile": "shell", "prompt": "sleep 8; echo survived > kept.txt; exit", "timeoutS": 120}
    task = instance.call("task.create", shell_task(slow, report_step()))
    started = wait_until(
        lambda: (t := instance.call("task.get", {"taskId": task["id"]}))["agentIds"] and t, timeout=60
    )
    instance.proc.kill()  # SIGKILL: the runner dies with it; the agent lives on in tmux
    instance.proc.wait()
    instance.start()
    done = settled(instance, task["id"], timeout=120)
    assert done["status"] == "done", done
    assert done["agentIds"][0] == started["agentIds"][0]  # the same agent, waited for again
    assert done["attempts"] == 2
    assert "+survived" in done["diff"]["patch"]


# -- the tick, with a clock of the test's own --------------------------------------------------------------

T0 = datetime(2030, 1, 7, 12, 0, 30, tzinfo=UTC)


def at(minute, second=0):
    return T0.replace(minute=minute, second=second)


def minutely(overlap="parallel", keep_runs=10, step=None):
    from scheduling import schedules

    template = shell_task(step or report_step())
    params = {"name": f"every-minute-{overlap}", "cron": "* * * * *", "template": template}
    return schedules.create_schedule(
        params | {"overlap": overlap, "keepRuns": keep_runs}, actor=SYSTEM_ACTOR, now=T0
    )


@pytest.fixture
def clock_db(db):
    """The test's database; runs are not sent to a worker (on_commit never fires inside a test's
    transaction): these tests start them themselves."""
    from agents.profiles import ensure_profiles

    ensure_profiles()


def test_a_schedule_creates_runs_at_its_times_and_only_then(clock_db):
    from scheduling import schedules

    schedule = minutely()
    assert schedule.next_run_at == at(1)
    assert schedules.tick(at(0, 59)) == []
    first = schedules.tick(at(1))
    assert [task.scheduled_for for task in first] == [at(1)]
    assert first[0].schedule_id == schedule.id
    assert first[0].status == "queued"
    assert schedules.tick(at(1, 30)) == []
    assert [task.scheduled_for for task in schedules.tick(at(2, 5))] == [at(2)]
    schedule.refresh_from_db()
    assert (schedule.next_run_at, schedule.last_run_at) == (at(3), at(2, 5))


def test_overlap_skip_starts_nothing_while_a_run_is_open(clock_db):
    from scheduling import schedules
    from scheduling.models import Task

    schedule = minutely("skip")
    [run] = schedules.tick(at(1))
    assert schedules.tick(at(2)) == []  # the first run is still queued
    schedule.refresh_from_db()
    assert (schedule.skipped_runs, schedule.next_run_at) == (1, at(3))
    Task.objects.filter(pk=run.pk).update(status="done")
    assert [task.scheduled_for for task in schedules.tick(at(3))] == [at(3)]


def test_overlap_queue_creates_the_run_but_starts_it_after_the_open_one(clock_db):
    from scheduling import schedules
    from scheduling.dispatch import STALE_AFTER_S, claim_task
    from scheduling.models import Task

    minutely("queue")
    [first] = schedules.tick(at(1))
    Task.objects.filter(pk=first.pk).update(status="running")
    [second] = schedules.tick(at(2))
    assert second.status == "queued"
    assert claim_task(second.id, "runner-a", STALE_AFTER_S) is None  # waits for the first
    Task.objects.filter(pk=first.pk).update(status="done")
    claimed = claim_task(second.id, "runner-a", STALE_AFTER_S)
    assert (claimed.status, claimed.runner, claimed.attempts) == ("running", "runner-a", 1)
    assert claim_task(second.id, "runner-b", STALE_AFTER_S) is None  # one runner at a time


def test_an_outage_of_ten_minutes_is_caught_up_with_exactly_one_run(clock_db):
    from cocoon.models import ActivityEntry
    from scheduling import schedules

    schedule = minutely()
    assert len(schedules.tick(at(1))) == 1
    # cocoond is down from 12:01:30 to 12:11:30: ten due times (12:02 ... 12:11) pass unseen.
    caught_up = schedules.catch_up(at(11, 30))
    assert [task.scheduled_for for task in caught_up] == [at(11)]
    entry = ActivityEntry.objects.filter(key="schedule.caught_up").get()
    assert entry.params == {"name": schedule.name, "missed": 10}
    assert schedules.tick(at(11, 40)) == []
    assert schedules.catch_up(at(11, 45)) == []  # once
    assert len(schedules.tick(at(12))) == 1


def test_keep_runs_leaves_two_finished_runs_and_removes_older_sandboxes(
    clock_db, sandbox_image, docker_client
):
    from django.conf import settings

    from sandboxes.models import Sandbox
    from scheduling import runner, schedules, services
    from scheduling.models import Task

    schedule = minutely(keep_runs=2, step={"profile": "shell", "prompt": "exit 3", "timeoutS": 60})
    runs = [task for minute in (1, 2, 3) for task in schedules.tick(at(minute))]
    finished = []
    for task in runs:
        assert runner.drive_task(task.id) == "failed"  # a failed run keeps its sandbox for a look...
        finished.append(Task.objects.get(pk=task.pk))
        assert finished[-1].reason == {"key": "step_exit", "params": {"step": 1, "code": 3}}
    kept = list(Task.objects.filter(schedule=schedule).order_by("scheduled_for"))
    assert [task.id for task in kept] == [run.id for run in runs[1:]]
    # ...until retention drops it with its sandbox.
    assert not Sandbox.objects.filter(pk=finished[0].sandbox_id).exists()
    names = {c.name for c in docker_client.containers.list(all=True)}
    assert f"{settings.COCOON_INSTANCE}-{finished[0].sandbox_id}" not in names
    assert f"{settings.COCOON_INSTANCE}-{finished[1].sandbox_id}" in names
    for task in kept:
        Sandbox.objects.get(pk=task.sandbox_id)
        services.remove_own_sandbox(task)


def test_a_failed_run_keeps_its_sandbox_until_the_hours_of_the_policy_are_over(clock_db, sandbox_image):
    """Issue #37: no silent leftovers. settings.tasks.keepFailedSandboxHours (24 by default) says how long a
    failed run's own sandbox stays for a look; the scheduling tick removes it then."""
    from sandboxes.models import Sandbox
    from scheduling import runner, services
    from scheduling.models import Task
    from scheduling.schemas import serialize_task

    task = services.create_task(shell_task(shell("exit 3")), actor=SYSTEM_ACTOR, start=False)
    assert runner.drive_task(task.id) == "failed"
    task.refresh_from_db()
    kept_until = serialize_task(task, "en")["sandboxKeptUntil"]
    assert datetime.fromisoformat(kept_until) == task.finished_at + timedelta(hours=24)
    assert services.remove_expired_sandboxes(task.finished_at + timedelta(hours=23)) == 0
    assert Sandbox.objects.filter(pk=task.sandbox_id).exists()
    assert services.remove_expired_sandboxes(task.finished_at + timedelta(hours=24)) == 1
    assert not Sandbox.objects.filter(pk=task.sandbox_id).exists()
    assert Task.objects.get(pk=task.pk).sandbox_id == task.sandbox_id  # the task still says which it was
    assert services.remove_expired_sandboxes(task.finished_at + timedelta(days=9)) == 0


# With SEEN set, only says whether the question is on a screen; without, answers it.
ANSWER = """
for session in $(tmux -L cocoon list-sessions -F '#S' 2>/dev/null); do
  if tmux -L cocoon capture-pane -p -t "=$session:" | grep -q 'Proceed? \\[y/n\\]'; then
    if [ -n "${SEEN:-}" ]; then echo asked; continue; fi
    tmux -L cocoon send-keys -t "=$session:" y Enter && echo answered
  fi
done
"""


def test_a_blocked_agent_is_reported_and_waited_for_until_it_goes_on(clock_db, sandbox_image, docker_client):
    """A profile whose screen shows a question is blocked; the run says so and keeps waiting, and goes on
    once someone answers (here a thread typing into the sandbox's tmux, like a human in the terminal)."""
    import threading

    from django.conf import settings

    from agents.models import AgentProfile
    from cocoon.models import ActivityEntry
    from scheduling import runner, services

    AgentProfile.objects.create(
        name="asker", command=["bash", "-l"], hooks=True, blocked_patterns=[r"Proceed\? \[y/n\]"]
    )
    # The question is put together by printf, so the typed command line itself does not show it.
    ask = 'read -p "$(printf "Proc%sed? [y/n] " e)" answer; echo "$answer" > answer.txt; '
    step = report_step() | {"profile": "asker", "prompt": ask + report_step()["prompt"]}
    task = services.create_task(shell_task(step), actor=SYSTEM_ACTOR)
    answered = threading.Event()

    def answer() -> None:
        # Like a human who looks only now and then: the question stands for 15 s (three of the run's
        # own checks when no poller runs here) before it is answered.
        label = f"io.cocoon.instance={settings.COCOON_INSTANCE}"
        asked_at = None
        while not answered.wait(1):
            for container in docker_client.containers.list(filters={"label": label}):
                output = container.exec_run(
                    ["sh", "-c", ANSWER], user="agent", environment={"SEEN": "1"}
                ).output
                if b"asked" in output and asked_at is None:
                    asked_at = time.monotonic()
                late = asked_at and time.monotonic() - asked_at > 15
                if late and b"answered" in container.exec_run(["sh", "-c", ANSWER], user="agent").output:
                    answered.set()

    helper = threading.Thread(target=answer, daemon=True)
    helper.start()
    try:
        assert runner.drive_task(task.id) == "done"
    finally:
        answered.set()
        helper.join()
    task.refresh_from_db()
    assert ActivityEntry.objects.filter(key="task.blocked", params__task=task.id).exists()
    assert "+y" in task.diff["patch"]


def test_a_schedule_whose_template_went_stale_says_so_and_the_others_still_fire(clock_db):
    from agents.models import AgentProfile
    from cocoon.models import ActivityEntry
    from scheduling import schedules

    AgentProfile.objects.create(name="short-lived", command=["bash"])
    stale = minutely(step={"profile": "short-lived", "prompt": "exit"})
    healthy = minutely("skip")
    AgentProfile.objects.filter(name="short-lived").delete()
    assert [task.schedule_id for task in schedules.tick(at(1))] == [healthy.id]
    entry = ActivityEntry.objects.get(key="schedule.run_failed")
    assert entry.params["name"] == stale.name
    assert "workflow.0.profile: There is no agent profile short-lived." in entry.params["error"]
    stale.refresh_from_db()
    assert stale.next_run_at == at(2)  # tried again at the next time, not at every tick
    # Its owner can still switch it off: an update checks only the fields it changes.
    disabled = schedules.update_schedule(stale.id, {"enabled": False}, actor=SYSTEM_ACTOR, now=at(1))
    assert disabled.enabled is False
    assert disabled.next_run_at is None


# -- tasks in an existing sandbox, and approve with a push and a pull request ------------------------------


def test_a_task_in_an_existing_sandbox_leaves_the_sandbox_alone(cocoond, sandbox_image):
    sandbox = cocoond.call("sandbox.create", {"network": "none"})
    try:
        write = shell("echo mine > mine.txt; " + report_step()["prompt"])
        task = cocoond.call("task.create", {"prompt": "x", "sandboxId": sandbox["id"], "workflow": [write]})
        done = settled(cocoond, task["id"])
        assert (done["status"], done["ownSandbox"], done["sandboxId"]) == ("done", False, sandbox["id"])
        assert [entry["path"] for entry in done["diff"]["files"]] == ["mine.txt"]
        assert cocoond.call("sandbox.get", {"sandboxId": sandbox["id"]})["state"] == "running"
    finally:
        cocoond.call("sandbox.delete", {"sandboxId": sandbox["id"]})


def test_approve_pushes_the_changes_and_opens_a_pull_request(cocoond, github):  # noqa: F811
    change = shell("echo approved change >> README.md; " + report_step(close=False)["prompt"])
    params = {"network": "open", "repo": f"{github.url}/owner/project.git"}
    task = cocoond.call("task.create", {"prompt": "Fix the readme", "sandbox": params, "workflow": [change]})
    assert settled(cocoond, task["id"])["status"] == "review"
    approved = cocoond.call(
        "task.approve",
        {"taskId": task["id"], "push": {"branch": "cocoon/readme"}, "pullRequest": {"title": "Readme"}},
    )
    assert approved["status"] == "done"
    assert approved["report"]["pullRequest"] == {"number": 7, "url": f"{github.url}/pull/7"}
    repository = str(github.root / "owner" / "project.git")
    readme = git("--git-dir", repository, "show", "refs/heads/cocoon/readme:README.md")
    assert readme.endswith("approved change\n")
    pull = json.loads([r for r in github.requests if r["path"].startswith("/api/")][-1]["body"])
    assert pull == {"title": "Readme", "body": "all good", "base": "main", "head": "cocoon/readme"}


def test_a_run_that_keeps_losing_its_worker_is_given_up_not_left_running(clock_db):
    from django.utils import timezone

    from scheduling import runner, services
    from scheduling.dispatch import STALE_AFTER_S
    from scheduling.models import Task

    task = services.create_task(shell_task(shell("exit")), actor=SYSTEM_ACTOR)
    stale = timezone.now() - timedelta(seconds=STALE_AFTER_S + 1)
    Task.objects.filter(pk=task.pk).update(status="running", runner="dead", heartbeat_at=stale, attempts=3)
    assert runner.drive_task(task.id, stale_after_s=3600) is None  # its heartbeat is not that old
    assert runner.drive_task(task.id) == "failed"
    task.refresh_from_db()
    assert (task.status, task.reason["key"], task.attempts, task.runner) == ("failed", "runner_lost", 4, "")


def test_the_system_cron_trigger_runs_the_same_tick(clock_db):
    import io

    from django.core.management import call_command
    from django.utils import timezone

    from scheduling import schedules
    from scheduling.models import Task

    params = {"name": "from-cron", "cron": "* * * * *", "template": shell_task(shell("exit"))}
    schedule = schedules.create_schedule(
        params, actor=SYSTEM_ACTOR, now=timezone.now() - timedelta(minutes=2)
    )
    output = io.StringIO()
    call_command("schedules_tick", stdout=output)
    assert output.getvalue().strip() == "1 run(s) created"
    assert Task.objects.filter(schedule=schedule).count() == 1


@pytest.mark.e2e
def test_celery_beat_fires_a_minutely_schedule_in_a_live_cocoond(cocoond, sandbox_image):
    template = shell_task(report_step())
    schedule = cocoond.call("schedule.create", {"name": "beat", "cron": "* * * * *", "template": template})
    try:
        runs = wait_until(lambda: cocoond.call("task.list", {"scheduleId": schedule["id"]}), timeout=90)
        assert runs[0]["scheduledFor"] == schedule["nextRunAt"]
        assert settled(cocoond, runs[0]["id"])["status"] == "done"
    finally:
        cocoond.call("schedule.delete", {"scheduleId": schedule["id"]})
