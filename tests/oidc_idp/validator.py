from oauth2_provider.oauth2_validators import OAuth2Validator


class GroupsValidator(OAuth2Validator):
    """Puts the user's name, address and Django groups into the ID token, as IdPs with a groups mapper do."""

    oidc_claim_scope = None  # every claim, whatever the scopes

    def get_additional_claims(self, request):
        user = request.user
        return {
            "preferred_username": user.username,
            "email": user.email,
            "groups": sorted(user.groups.values_list("name", flat=True)),
        }
