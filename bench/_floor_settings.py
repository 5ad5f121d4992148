"""The project's settings with one more URL, the framework's floor (bench/_floor_urls.py):
bench/floor.py serves it beside the real API from the same workers."""

from hashee.settings import *  # noqa: F403 - every setting of the project, as deployed

ROOT_URLCONF = "_floor_urls"
