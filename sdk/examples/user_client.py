import asyncio
import sys

from hashee_sdk import Device, KeyStore, tool


@tool(scope="notes:read", sensitivity="low")
def read_note(title: str) -> str:
    """Read one of your notes."""
    return f"{title}: milk, eggs, coffee"


async def main(url: str, user_key: str) -> None:
    async with Device(url, user_key, tools=[read_note], keystore=KeyStore(".hashee/device"),
                      prompt=lambda request: True) as device:  # a real app asks the user here
        print("serving read_note", flush=True)
        await device.serve_forever()

if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:3]))
