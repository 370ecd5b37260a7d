"""Ticks sent as messages to a task queue's broker: the sender protocol, the task body
that sends (``sending.py``) and its first broker library, Celery (``celery_beat.py``)."""
