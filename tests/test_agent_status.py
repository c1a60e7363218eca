"""The status rules (agents.status, SPEC §4) as a pure function, and a labelled corpus of screens."""

from agents.status import (
    HOOK_FRESHNESS_S,
    QUESTION_RECHECK_S,
    SETTLE_S,
    STARTUP_GRACE_S,
    Memory,
    Observation,
    ScreenFacts,
    ScreenRules,
    decide,
    read_screen,
)
from tests.screens import corpus
from tests.screens.corpus import rules_of

NOW = 1_000_000.0
STARTED = NOW - 60  # past the start-up grace unless a test says otherwise


NOTHING = ScreenFacts()


def memory(status="working", *, created=STARTED, last_input=STARTED, changed=NOW, screen=NOTHING):
    return Memory(status, created, last_input, changed, screen)


CLAUDE = rules_of("claude-code")
QUIET = Observation(alive=True)  # nothing changed on the screen since the last poll
MOVING = Observation(alive=True, screen=ScreenFacts())


def test_an_ended_session_is_exited_with_its_code():
    decision = decide(CLAUDE, memory(), Observation(alive=False, exit_code=3, hook=f"done {NOW}"), NOW)
    assert (decision.status, decision.exit_code, decision.rule) == ("exited", 3, "session_ended")


def test_a_decision_that_time_may_change_says_when_to_look_again():
    # The watcher gets no sign for time passing: each rule that counts quiet time names its moment.
    moving = decide(CLAUDE, memory(), MOVING, NOW)
    assert (moving.rule, moving.recheck_s) == ("screen_changing", SETTLE_S)
    settling = decide(CLAUDE, memory(changed=NOW - 1), QUIET, NOW)
    assert (settling.rule, settling.recheck_s) == ("settling", SETTLE_S - 1)
    young = decide(CLAUDE, memory("unknown", created=NOW - 4, last_input=None), QUIET, NOW)
    assert (young.rule, young.recheck_s) == ("start_up_grace", STARTUP_GRACE_S - 4)
    working = decide(CLAUDE, memory(changed=NOW - 5), Observation(alive=True, hook=f"working {NOW}"), NOW)
    assert (working.status, working.recheck_s) == ("working", HOOK_FRESHNESS_S - 5)
    question = Observation(alive=True, screen=ScreenFacts(question="Do you want to proceed"))
    assert decide(CLAUDE, memory(), question, NOW).recheck_s == QUESTION_RECHECK_S
    # Settled states wait for news from the sandbox.
    done = decide(CLAUDE, memory(changed=NOW - 10), Observation(alive=True, hook=f"done {NOW}"), NOW)
    assert done.recheck_s is None
    assert decide(CLAUDE, memory(changed=NOW - 10), QUIET, NOW).recheck_s is None


def test_hook_reports_win_over_the_screen_but_only_when_newer_than_the_last_input():
    question = ScreenFacts(question="Do you want to proceed")
    seen = Observation(alive=True, hook=f"done {NOW - 5}")
    decision = decide(CLAUDE, memory(screen=question, changed=NOW - 30), seen, NOW)
    assert (decision.status, decision.source, decision.rule) == ("done", "hook", "hook")
    # The user typed after that report: it speaks of the last turn, the screen decides.
    stale = decide(CLAUDE, memory(last_input=NOW - 2, screen=question, changed=NOW - 30), seen, NOW)
    assert (stale.status, stale.source, stale.rule) == ("blocked", "heuristic", "question")


def test_a_hooks_working_hands_over_after_a_quiet_screen_without_the_indicator():
    seen = Observation(alive=True, hook=f"working {NOW - 60}")
    busy = decide(CLAUDE, memory(changed=NOW - HOOK_FRESHNESS_S + 1), seen, NOW)
    assert (busy.status, busy.source) == ("working", "hook")
    quiet = decide(CLAUDE, memory(changed=NOW - HOOK_FRESHNESS_S - 1), seen, NOW)
    assert (quiet.status, quiet.source, quiet.rule) == ("done", "heuristic", "quiet_after_task")
    thinking = memory(changed=NOW - HOOK_FRESHNESS_S - 1, screen=ScreenFacts(indicator=True))
    assert decide(CLAUDE, thinking, seen, NOW).source == "hook"


def test_hooks_of_a_profile_without_hooks_are_ignored():
    rules = ScreenRules.of(["aider"], hooks=False, working="", blocked=[])
    decision = decide(rules, memory(changed=NOW - 30), Observation(alive=True, hook=f"blocked {NOW}"), NOW)
    assert (decision.status, decision.rule) == ("done", "quiet_after_task")


def test_a_shell_works_while_a_command_runs_in_the_foreground():
    shell = rules_of("shell")
    assert decide(shell, memory(), Observation(alive=True, command="sleep"), NOW).status == "working"
    idle = decide(shell, memory(), Observation(alive=True, command="bash"), NOW)
    assert (idle.status, idle.rule) == ("idle", "shell_prompt")


def test_a_question_counts_only_once_it_stands_still():
    question = ScreenFacts(question="Do you want to proceed")
    streaming = decide(CLAUDE, memory(), Observation(alive=True, screen=question), NOW)
    assert streaming.status == "working"
    standing = decide(CLAUDE, memory(screen=question, changed=NOW - 2), QUIET, NOW)
    assert (standing.status, standing.detail) == ("blocked", "Do you want to proceed")


def test_the_start_up_grace_never_settles_a_fresh_agent():
    fresh = NOW - STARTUP_GRACE_S + 2
    quiet_long = dict(created=fresh, changed=fresh)
    without_task = decide(CLAUDE, memory("unknown", last_input=None, **quiet_long), QUIET, NOW)
    assert (without_task.status, without_task.rule) == ("unknown", "start_up_grace")
    with_task = decide(CLAUDE, memory(last_input=fresh, **quiet_long), QUIET, NOW)
    assert (with_task.status, with_task.rule) == ("working", "start_up_grace")
    after = decide(CLAUDE, memory("unknown", last_input=None, changed=NOW - 5), QUIET, NOW)
    assert (after.status, after.rule) == ("idle", "quiet")


def test_a_moving_screen_is_working_and_settles_to_done_after_a_task_or_idle_before_any():
    assert decide(CLAUDE, memory("idle"), MOVING, NOW).rule == "screen_changing"
    settling = decide(CLAUDE, memory(changed=NOW - SETTLE_S + 1), QUIET, NOW)
    assert (settling.status, settling.rule) == ("working", "settling")
    settled = memory(changed=NOW - SETTLE_S - 1, last_input=NOW - 20)
    assert decide(CLAUDE, settled, QUIET, NOW).status == "done"
    never_asked = memory(changed=NOW - SETTLE_S - 1, last_input=None)
    assert decide(CLAUDE, never_asked, QUIET, NOW).status == "idle"
    ignored_input = memory("idle", changed=NOW - 30, last_input=NOW - 20)  # no reaction on screen
    assert decide(CLAUDE, ignored_input, QUIET, NOW).status == "idle"


def test_questions_quoted_above_the_bottom_of_the_screen_do_not_count():
    prose = "Claude said: Do you want to proceed? is what it asks.\n" + "\n".join(
        f"line {n}" for n in range(20)
    )
    assert read_screen(CLAUDE, prose).question == ""
    assert read_screen(CLAUDE, "line\n" * 20 + " Do you want to proceed?\n > 1. Yes\n").question


# -- the labelled corpus -----------------------------------------------------------------------------
# tests/screens/<profile>/<version>/<label>-<what>.txt: a screen as `tmux capture-pane -p` gives it, of
# that CLI version (tests/screens/README.md). Shells have no corpus: their status comes from the
# foreground process, not the screen.
CORPUS = corpus.screens()


def test_the_corpus_covers_every_label_of_both_clis():
    labels = {(profile, label) for profile, _version, label in map(corpus.profile_version_label, CORPUS)}
    expected = {
        (cli, label) for cli in ("claude-code", "codex") for label in ("working", "blocked", "done", "idle")
    }
    assert expected <= labels


def test_every_captured_screen_is_classified_as_labelled():
    tally, wrong = corpus.accuracy(CORPUS)
    print(corpus.report(tally))  # shown with -s or -rA
    assert not wrong, "\n".join([corpus.report(tally), *wrong])


# -- failed turns: never done (issue #37) -------------------------------------------------------------


def test_a_hook_that_reports_a_failed_turn_gives_error_with_the_clis_reason():
    seen = Observation(alive=True, hook=f"error:authentication_failed {NOW}")
    decision = decide(CLAUDE, memory(changed=NOW - 10), seen, NOW)
    assert (decision.status, decision.source, decision.reason) == ("error", "hook", "authentication_failed")
    bare = decide(CLAUDE, memory(changed=NOW - 10), Observation(alive=True, hook=f"error {NOW}"), NOW)
    assert (bare.status, bare.reason) == ("error", "api_error")


def test_a_done_with_an_error_standing_on_the_screen_is_an_error():
    screen = "> write hello.txt\n  ⎿  Not logged in · Please run /login\n\n> \n  ? for shortcuts"
    facts = read_screen(CLAUDE, screen)
    assert facts.error == "not_logged_in"
    by_hook = decide(
        CLAUDE, memory(changed=NOW - 10, screen=facts), Observation(alive=True, hook=f"done {NOW}"), NOW
    )
    assert (by_hook.status, by_hook.rule, by_hook.reason) == ("error", "error_on_screen", "not_logged_in")
    quiet = decide(CLAUDE, memory(changed=NOW - 10, screen=facts), QUIET, NOW)
    assert (quiet.status, quiet.reason) == ("error", "not_logged_in")
    api = read_screen(
        CLAUDE, '> hi\n  ⎿  API Error: 529 {"type":"error","error":{"type":"overloaded_error"}}\n> '
    )
    assert api.error == "api_error"


def test_an_error_on_screen_does_not_stop_a_working_or_blocked_agent():
    # Claude Code prints its retries ("API Error ... Retrying in 5 seconds") while it goes on working.
    facts = ScreenFacts(indicator=True, error="api_error")
    assert decide(CLAUDE, memory(screen=facts), QUIET, NOW).status == "working"
    asking = ScreenFacts(question="Do you want to proceed", error="api_error")
    assert decide(CLAUDE, memory(changed=NOW - 10, screen=asking), QUIET, NOW).status == "blocked"


def test_hook_reports_with_a_reason_are_parsed_strictly():
    from agents.status import parse_hook

    assert parse_hook(f"error:rate_limit {NOW}") == ("error", NOW)
    for bad in (
        f"done:rate_limit {NOW}",
        f"error:Rate-Limit {NOW}",
        f"error:{'x' * 41} {NOW}",
        f"error: {NOW}",
    ):
        assert parse_hook(bad) is None, bad
