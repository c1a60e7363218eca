from django.db import models


class UsageRecord(models.Model):
    """One request of an agent through the credential proxy: what it asked, what it used, its cost.

    The id is the proxy's own (random, per request): a record read twice (a restart between reading the
    proxy's file and removing it) is stored once.
    """

    id = models.CharField(primary_key=True, max_length=32)
    at = models.DateTimeField(db_index=True)  # when the request came
    sandbox_id = models.CharField(max_length=40, db_index=True)
    # Its sandbox's project when it was read (it stays the project's after the sandbox is gone).
    project = models.CharField(max_length=63, blank=True, db_index=True)
    agent_id = models.CharField(max_length=40, blank=True, db_index=True)
    task_id = models.CharField(max_length=40, blank=True, db_index=True)
    schedule_id = models.CharField(max_length=40, blank=True, db_index=True)
    provider = models.CharField(max_length=32)
    model = models.CharField(max_length=200, blank=True)
    method = models.CharField(max_length=16)
    path = models.CharField(max_length=300)
    status = models.PositiveSmallIntegerField()  # 0: no answer came
    stream = models.BooleanField(default=False)
    complete = models.BooleanField(default=False)  # the answer ended as its framing said (not cut short)
    final = models.BooleanField(default=False)  # written when the request ended (not at a stream's start)
    latency_ms = models.FloatField()
    input_tokens = models.PositiveBigIntegerField(default=0)  # without the cached ones
    output_tokens = models.PositiveBigIntegerField(default=0)
    cache_write_tokens = models.PositiveBigIntegerField(default=0)
    cache_read_tokens = models.PositiveBigIntegerField(default=0)
    cost = models.DecimalField(max_digits=14, decimal_places=6, default=0)  # settings usage.currency
    priced = models.BooleanField(default=False)  # a price matched its provider and model
    refused = models.BooleanField(default=False)  # the proxy answered it itself: a budget is spent

    class Meta:
        ordering = ["-at", "-id"]

    def __str__(self) -> str:
        return f"{self.id} {self.provider} {self.model}"


class BudgetState(models.Model):
    """How much of one budget is spent, as last judged: an agent's, a task's, a sandbox's, or the day's cap.

    A spent one (exceeded) is what the credential proxy refuses requests for (egress policy "refuse").
    """

    scope = models.CharField(max_length=10)  # agent, task, sandbox, day
    subject = models.CharField(max_length=40)  # the agent, task or sandbox id, or the day (YYYY-MM-DD, UTC)
    state = models.CharField(max_length=10, default="ok")  # ok, warned, exceeded
    budget = models.JSONField()  # what it was judged against ({cost?, tokens?})
    spent_cost = models.DecimalField(max_digits=14, decimal_places=6, default=0)
    spent_tokens = models.PositiveBigIntegerField(default=0)
    sandbox_id = models.CharField(max_length=40, blank=True)
    agent_id = models.CharField(max_length=40, blank=True)
    task_id = models.CharField(max_length=40, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["scope", "subject"], name="one_state_per_budget")]

    def __str__(self) -> str:
        return f"{self.scope} {self.subject}: {self.state}"
