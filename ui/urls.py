from django.urls import path

from cocoon.auth import SessionActorAuthentication
from sandboxes.views import ArchiveView
from ui import answer_views, node_views, settings_views, task_views, usage_views, views

app_name = "ui"

urlpatterns = [
    path("", views.dashboard, name="dashboard"),
    path("login", views.login, name="login"),
    path("logout", views.logout, name="logout"),
    path("setup/fix", views.setup_fix, name="setup_fix"),
    path("attention/<str:item_id>/do/<str:action>", views.attention_action, name="attention_action"),
    # A notification's answer page: the signed token is the only credential (attention.links).
    path("a/<str:token>", answer_views.answer, name="answer"),
    path("sandboxes/", views.sandboxes, name="sandboxes"),
    path("sandboxes/<str:sandbox_id>/", views.sandbox, name="sandbox"),
    path("sandboxes/<str:sandbox_id>/do/<str:action>", views.sandbox_action, name="sandbox_action"),
    path("sandboxes/<str:sandbox_id>/budget", views.sandbox_budget, name="sandbox_budget"),
    path("sandboxes/<str:sandbox_id>/files/", views.files, name="files"),
    path("sandboxes/<str:sandbox_id>/files/write", views.files_write, name="files_write"),
    # The API's own archive stream, for a logged-in browser (a download link cannot carry a header).
    path(
        "sandboxes/<str:sandbox_id>/archive",
        ArchiveView.as_view(authentication_classes=[SessionActorAuthentication]),
        name="archive",
    ),
    path("sandboxes/<str:sandbox_id>/diff/", views.diff, name="diff"),
    path("sandboxes/<str:sandbox_id>/git/<str:action>", views.git_action, name="git_action"),
    path("agents/", views.agents, name="agents"),
    path("agents/spawn", views.agent_spawn, name="agent_spawn"),
    path("agents/<str:agent_id>/", views.agent, name="agent"),
    path("agents/<str:agent_id>/do/<str:action>", views.agent_action, name="agent_action"),
    path("agents/<str:agent_id>/budget", views.agent_budget, name="agent_budget"),
    path("activity/", views.activity, name="activity"),
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
    path("settings/", settings_views.general, name="settings"),
    path("settings/egress", settings_views.egress, name="egress"),
    path("settings/egress/allow", settings_views.egress_allow, name="egress_allow"),
    path("settings/providers", settings_views.providers, name="providers"),
    path("settings/providers/save", settings_views.provider_save, name="provider_save"),
    path("settings/providers/delete", settings_views.provider_delete, name="provider_delete"),
    path("settings/providers/test", settings_views.provider_test, name="provider_test"),
    path("settings/notifications", settings_views.notifications, name="notifications"),
    path("settings/notifications/delete", settings_views.notification_delete, name="notification_delete"),
    path("settings/notifications/test", settings_views.notification_test, name="notification_test"),
    # Not named usage_*: the sidebar marks Usage (not Settings) current on pages of that name.
    path("settings/usage", settings_views.prices, name="prices"),
    path("settings/usage/reset-prices", settings_views.prices_reset, name="prices_reset"),
    path("settings/secrets", settings_views.secrets, name="secrets"),
    path("settings/tokens", settings_views.tokens, name="tokens"),
    path("settings/profiles", settings_views.profiles, name="profiles"),
    path("settings/nodes", node_views.nodes, name="nodes"),
    path("settings/nodes/<str:node_id>/do/<str:action>", node_views.node_action, name="node_action"),
]
