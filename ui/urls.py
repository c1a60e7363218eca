from django.urls import path

from cocoon.auth import SessionActorAuthentication
from sandboxes.views import ArchiveView
from ui import (
    activity_views,
    agent_views,
    answer_views,
    dashboard_views,
    join_views,
    login_views,
    node_views,
    project_views,
    sandbox_views,
    task_views,
    usage_views,
    workspace_views,
)
from ui.settings import egress, general, notifications, prices, profiles, projects, providers, secrets, tokens

app_name = "ui"

urlpatterns = [
    path("", dashboard_views.dashboard, name="dashboard"),
    path("login", login_views.login, name="login"),
    path("logout", login_views.logout, name="logout"),
    path("sso/login", login_views.sso_start, name="sso_start"),
    path("sso/callback", login_views.sso_callback, name="sso_callback"),
    path("project", project_views.switch_project, name="switch_project"),
    path("projects/<str:project>/members", project_views.members, name="members"),
    path("setup/fix", dashboard_views.setup_fix, name="setup_fix"),
    path(
        "attention/<str:item_id>/do/<str:action>", dashboard_views.attention_action, name="attention_action"
    ),
    path("attention/<str:item_id>/item", dashboard_views.attention_item, name="attention_item"),
    # A notification's answer page: the signed token is the only credential (attention.links).
    path("a/<str:token>", answer_views.answer, name="answer"),
    # An invitation's page: the link is the only credential (cocoon.invites).
    path("join/<str:token>", join_views.join, name="join"),
    path("sandboxes/", sandbox_views.sandboxes, name="sandboxes"),
    path("sandboxes/<str:sandbox_id>/", sandbox_views.sandbox, name="sandbox"),
    path("sandboxes/<str:sandbox_id>/do/<str:action>", sandbox_views.sandbox_action, name="sandbox_action"),
    path("sandboxes/<str:sandbox_id>/budget", sandbox_views.sandbox_budget, name="sandbox_budget"),
    path("sandboxes/<str:sandbox_id>/files/", workspace_views.files, name="files"),
    path("sandboxes/<str:sandbox_id>/files/write", workspace_views.files_write, name="files_write"),
    # The API's own archive stream, for a logged-in browser (a download link cannot carry a header).
    path(
        "sandboxes/<str:sandbox_id>/archive",
        ArchiveView.as_view(authentication_classes=[SessionActorAuthentication]),
        name="archive",
    ),
    path("sandboxes/<str:sandbox_id>/diff/", workspace_views.diff, name="diff"),
    path("sandboxes/<str:sandbox_id>/git/<str:action>", workspace_views.git_action, name="git_action"),
    path("agents/", agent_views.agents, name="agents"),
    path("agents/spawn", agent_views.agent_spawn, name="agent_spawn"),
    path("agents/<str:agent_id>/", agent_views.agent, name="agent"),
    path("agents/<str:agent_id>/do/<str:action>", agent_views.agent_action, name="agent_action"),
    path("agents/<str:agent_id>/card", agent_views.agent_card, name="agent_card"),
    path("agents/<str:agent_id>/answer", answer_views.agent_answer, name="agent_answer"),
    path("agents/<str:agent_id>/budget", agent_views.agent_budget, name="agent_budget"),
    path("activity/", activity_views.activity, name="activity"),
    path("usage/", usage_views.usage, name="usage"),
    path("usage/export.csv", usage_views.export, name="usage_export"),
    path("tasks/", task_views.tasks, name="tasks"),
    path("tasks/<str:task_id>/", task_views.task, name="task"),
    path("tasks/<str:task_id>/do/<str:action>", task_views.task_action, name="task_action"),
    path("tasks/<str:task_id>/budget", task_views.task_budget, name="task_budget"),
    path("schedules/", task_views.schedules, name="schedules"),
    path("schedules/new", task_views.schedule_form, name="schedule_new"),
    path("schedules/preview", task_views.schedule_preview, name="schedule_preview"),
    path("schedules/<str:schedule_id>/", task_views.schedule_form, name="schedule"),
    path("schedules/<str:schedule_id>/do/<str:action>", task_views.schedule_action, name="schedule_action"),
    path("settings/", general.general, name="settings"),
    path("settings/egress", egress.egress, name="egress"),
    path("settings/egress/allow", egress.egress_allow, name="egress_allow"),
    path("settings/providers", providers.providers, name="providers"),
    path("settings/providers/save", providers.provider_save, name="provider_save"),
    path("settings/providers/delete", providers.provider_delete, name="provider_delete"),
    path("settings/providers/test", providers.provider_test, name="provider_test"),
    path("settings/notifications", notifications.notifications, name="notifications"),
    path("settings/notifications/delete", notifications.notification_delete, name="notification_delete"),
    path("settings/notifications/test", notifications.notification_test, name="notification_test"),
    # Not named usage_*: the sidebar marks Usage (not Settings) current on pages of that name.
    path("settings/usage", prices.prices, name="prices"),
    path("settings/usage/reset-prices", prices.prices_reset, name="prices_reset"),
    path("settings/secrets", secrets.secrets, name="secrets"),
    path("settings/tokens", tokens.tokens, name="tokens"),
    path("settings/projects", projects.projects, name="projects"),
    path("settings/profiles", profiles.profiles, name="profiles"),
    path("settings/nodes", node_views.nodes, name="nodes"),
    path("settings/nodes/<str:node_id>/do/<str:action>", node_views.node_action, name="node_action"),
]
