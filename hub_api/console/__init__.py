"""The web console at /console: server-rendered pages (Jinja2, `templates/`) over the services
the API uses."""
