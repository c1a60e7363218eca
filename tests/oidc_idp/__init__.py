"""A real OpenID provider (django-oauth-toolkit) that the single sign-on tests run in a process of its own."""
