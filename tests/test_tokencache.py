"""The token cache (cocoon.tokencache): a request costs no token query, and a token that no longer
holds is refused at once, in this process and (tests/security/test_revocation.py) in every other."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from cocoon import tokencache
from cocoon.actors import SYSTEM_ACTOR
from cocoon.choices import TokenScope
from cocoon.errors import TokenRevoked
from cocoon.models import ApiToken
from cocoon.tokens import authenticate, create_token, hash_token, revoke_token

pytestmark = pytest.mark.django_db(transaction=True)  # forgetting happens on commit


@pytest.fixture(autouse=True)
def empty_cache():
    tokencache.clear()
    yield
    tokencache.clear()


def test_a_known_token_costs_one_lookup_not_one_per_request():
    token, plain = create_token("cache-hit", TokenScope.AGENT)
    assert authenticate(plain).token_id == token.id
    with CaptureQueriesContext(connection) as queries:
        for _ in range(20):
            assert authenticate(plain).token_id == token.id
    assert len(queries) == 0


def test_a_revoked_or_deleted_token_is_refused_at_once():
    create_token("cache-admin", TokenScope.ADMIN)  # the last admin token cannot be revoked
    revoked, revoked_plain = create_token("cache-revoked", TokenScope.ADMIN)
    deleted, deleted_plain = create_token("cache-deleted", TokenScope.AGENT)
    assert authenticate(revoked_plain)
    assert authenticate(deleted_plain)
    revoke_token(revoked.id, actor=SYSTEM_ACTOR)
    ApiToken.objects.filter(pk=deleted.pk).delete()  # by hand (admin, shell): the signal sees it too
    with pytest.raises(TokenRevoked):  # said so, so that its owner can tell the stale script
        authenticate(revoked_plain)
    assert authenticate(deleted_plain) is None


def test_a_lookup_that_raced_a_revocation_is_not_remembered():
    token, plain = create_token("cache-race", TokenScope.AGENT)
    actor = authenticate(plain)
    tokencache.clear()
    started = tokencache.generation()  # a lookup begins, reads the row...
    tokencache.forget("tk_some_other")  # ...a revocation is heard meanwhile...
    tokencache.put(hash_token(plain), actor, started)  # ...and what it read is not kept
    with CaptureQueriesContext(connection) as queries:
        assert authenticate(plain).token_id == token.id
    assert len(queries) >= 1
