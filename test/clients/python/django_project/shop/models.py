"""The shop app's one model: an order, created in the same transaction as its task."""
from django.db import models


class Order(models.Model):
    token = models.TextField(unique=True)

    class Meta:
        app_label = "shop"
