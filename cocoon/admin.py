from django.contrib import admin

from cocoon.models import ActivityEntry, ApiToken, Secret


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ["name", "scope", "created_at", "last_used_at"]
    exclude = ["token_hash"]
    readonly_fields = ["scope", "bootstrap", "created_at", "last_used_at"]


@admin.register(Secret)
class SecretAdmin(admin.ModelAdmin):
    list_display = ["name", "created_at", "updated_at"]
    exclude = ["ciphertext"]
    readonly_fields = ["created_at", "updated_at"]


@admin.register(ActivityEntry)
class ActivityEntryAdmin(admin.ModelAdmin):
    list_display = ["created_at", "key", "actor", "sandbox_id", "agent_id"]
    list_filter = ["key"]
    readonly_fields = ["key", "params", "actor", "sandbox_id", "agent_id", "created_at"]
