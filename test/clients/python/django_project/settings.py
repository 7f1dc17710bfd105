"""A minimal Django project for the Python client's end-to-end test: one app (shop) and the
harness's PostgreSQL (libpq's PGHOST, PGPORT, PGUSER, PGDATABASE) as 'default'; 'orders', a second
database with jobbuf and its own drain worker (test/e2e/clients_python.sh creates it); 'plain', the
cluster's postgres database, without jobbuf."""
import os


def database(name):
    return {
        "ENGINE": "django.db.backends.postgresql",
        "HOST": os.environ["PGHOST"],
        "PORT": os.environ["PGPORT"],
        "USER": os.environ["PGUSER"],
        "NAME": name,
    }


SECRET_KEY = "jobbuf-e2e"
USE_TZ = True
INSTALLED_APPS = ["shop"]
DATABASES = {
    "default": database(os.environ["PGDATABASE"]),
    "orders": database(os.environ.get("JOBBUF_ORDERS_DB", "orders")),
    "plain": database("postgres"),
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
