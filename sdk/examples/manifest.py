"""Print the agent's manifest, generated from the device's tools: python manifest.py > manifest.json"""
import json

from user_client import read_note

from hashee_sdk import manifest_from_tools

print(json.dumps(manifest_from_tools([read_note], agent_version="1.0.0",
                                     scope_labels={"notes:read": "Read your notes"}), indent=2))
