"""A minimal Django project for the Python client's end-to-end test: one app (shop) and the
harness's PostgreSQL (libpq's PGHOST, PGPORT, PGUSER, PGDATABASE)."""
import os

SECRET_KEY = "jobbuf-e2e"
USE_TZ = True
INSTALLED_APPS = ["shop"]
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.postgresql",
        "HOST": os.environ["PGHOST"],
        "PORT": os.environ["PGPORT"],
        "USER": os.environ["PGUSER"],
        "NAME": os.environ["PGDATABASE"],
    }
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
