from typing import Any

from django.db import migrations, models


def records_of_their_sandboxes_projects(apps: Any, schema_editor: Any) -> None:
    """Records of sandboxes still there are their projects'; the others stay the server's (no project)."""
    records = apps.get_model("usage", "UsageRecord").objects
    for sandbox_id, project in apps.get_model("sandboxes", "Sandbox").objects.values_list("pk", "project_id"):
        records.filter(sandbox_id=sandbox_id).update(project=project)


class Migration(migrations.Migration):
    dependencies = [
        ("usage", "0004_usagerecord_refused"),
        ("sandboxes", "0007_names_per_project"),
    ]

    operations = [
        migrations.AddField(
            model_name="usagerecord",
            name="project",
            field=models.CharField(blank=True, db_index=True, max_length=63),
        ),
        migrations.RunPython(records_of_their_sandboxes_projects, migrations.RunPython.noop),
    ]
