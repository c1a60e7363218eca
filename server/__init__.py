"""The server: cocoon's apps wired into one ASGI application and the cocoond command. Only this package
knows every app; the core (cocoon) and the apps never import it."""
