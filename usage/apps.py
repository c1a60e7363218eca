from django.apps import AppConfig


class UsageConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "usage"

    def ready(self) -> None:
        from egress import policy
        from scheduling import runner
        from usage import budgets

        policy.register_refusals(budgets.refusals)
        runner.register_explanation(budgets.explain)
