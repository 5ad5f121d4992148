"""Simplified Chinese pages say in Chinese what issue 26 found in English: the version-bump
warning, the webhook labels, the manifest schema's link (names of standards stay)."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.urls import reverse
from django.utils import translation

from agents.models import Agent
from portal.problems import problem_message
from tests.portal.test_views import browser_for

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("part", ["major", "minor"])
def test_the_version_bump_warning_is_chinese(part: str) -> None:
    english = (f"This change is breaking, but agent_version goes from 1.0.0 to 1.1.0 without raising the {part} "
               "version (SemVer: breaking changes raise it).")
    with translation.override("zh-hans"):
        said = problem_message("AGENT_VERSION_NOT_BUMPED", english)

    assert said.startswith("这是破坏性变更") and "1.0.0" in said and "1.1.0" in said
    assert ("主版本号" if part == "major" else "次版本号") in said and "breaking" not in said


def test_the_owners_pages_name_webhooks_and_the_schema_in_chinese(alice: User, agent: Agent, db: Any) -> None:
    client = browser_for(alice)
    pages = [client.get(reverse(name, args=[agent.pk]), HTTP_ACCEPT_LANGUAGE="zh-CN").content.decode()
             for name in ("portal:agent", "portal:agent-webhook")]

    for page in pages:
        assert ">Webhook<" not in page and "Webhook " not in page.replace("Standard Webhooks", "")
        assert "能力清单 Schema" not in page
    assert "事件回调" in pages[1]
