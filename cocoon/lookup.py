"""Loading one row by its key for a caller that answers not_found when it is not there."""

from typing import Any, TypeVar

from django.db.models import Model, QuerySet

from cocoon.errors import NotFound

M = TypeVar("M", bound=Model)


def get_or_not_found(source: type[M] | QuerySet[M], pk: Any, message: Any, **params: Any) -> M:
    """The row of source (a model or a queryset, e.g. with select_related) whose key is pk.

    Raises not_found with message (a lazy translation) filled in with params when there is none.
    """
    queryset = source if isinstance(source, QuerySet) else source._default_manager.all()
    row = queryset.filter(pk=pk).first()
    if row is None:
        raise NotFound(message, **params)
    return row


def must_exist(source: QuerySet[M], pk: Any, message: Any, **params: Any) -> None:
    """get_or_not_found for a caller that needs no row, only to know it is there: half the time."""
    if not source.filter(pk=pk).exists():
        raise NotFound(message, **params)
