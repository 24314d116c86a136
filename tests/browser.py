"""Headless Chromium driven over the DevTools protocol, for tests that use a page as a
reader would (click, type, choose) rather than parse its HTML.

Chromium is started with ``--remote-debugging-pipe``: commands go to its file descriptor
3 and replies come from 4, each one JSON message ended by a NUL byte. The network is
blocked (a proxy that does not exist), so a page that needs one fails its test.
"""

from __future__ import annotations

import json
import os
import subprocess
import time


class Browser:
    """One headless Chromium with one page open at ``url``; ``evaluate`` runs JavaScript
    in it and returns the value."""

    def __init__(self, chromium: str, url: str, width: int = 1280, height: int = 900):
        to_chromium, self._commands = os.pipe()
        self._replies, from_chromium = os.pipe()

        def descriptors():  # in the child: its ends of the pipes as 3 and 4
            read, write = os.dup(to_chromium), os.dup(from_chromium)
            os.dup2(read, 3)
            os.dup2(write, 4)

        self._process = subprocess.Popen(
            [
                chromium,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--proxy-server=127.0.0.1:9",
                "--proxy-bypass-list=<-loopback>",
                f"--window-size={width},{height}",
                "--remote-debugging-pipe",
                "about:blank",
            ],
            close_fds=False,
            preexec_fn=descriptors,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(to_chromium)
        os.close(from_chromium)
        self._sent, self._buffer, self._session = 0, b"", None
        target = self._send("Target.createTarget", url=url)["targetId"]
        self._session = self._send("Target.attachToTarget", targetId=target, flatten=True)[
            "sessionId"
        ]
        deadline = time.monotonic() + 60
        while self.evaluate("document.readyState + ' ' + location.href") != f"complete {url}":
            if time.monotonic() > deadline:
                raise TimeoutError(f"{url} did not load within 60 s")
            time.sleep(0.1)

    def evaluate(self, expression: str):
        """The value of ``expression`` in the page (an exception in it raises)."""
        reply = self._send(
            "Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True
        )
        if "exceptionDetails" in reply:
            raise RuntimeError(reply["exceptionDetails"])
        return reply["result"].get("value")

    def resize(self, width: int, height: int) -> None:
        """Lay the page out in a window of ``width`` x ``height`` CSS pixels."""
        self._send(
            "Emulation.setDeviceMetricsOverride",
            width=width,
            height=height,
            deviceScaleFactor=1,
            mobile=False,
        )

    def screenshot(self, path) -> None:
        """The visible part of the page as a PNG at ``path``."""
        import base64

        data = self._send("Page.captureScreenshot", format="png")["data"]
        with open(path, "wb") as file:
            file.write(base64.b64decode(data))

    def _send(self, method: str, **params) -> dict:
        self._sent += 1
        message = {"id": self._sent, "method": method, "params": params}
        if self._session is not None and not method.startswith("Target."):
            message["sessionId"] = self._session
        os.write(self._commands, json.dumps(message).encode() + b"\0")
        while True:
            while b"\0" not in self._buffer:
                chunk = os.read(self._replies, 1 << 16)
                if not chunk:
                    raise RuntimeError("Chromium closed its pipe")
                self._buffer += chunk
            raw, self._buffer = self._buffer.split(b"\0", 1)
            reply = json.loads(raw)
            if reply.get("id") == self._sent:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply["result"]

    def close(self) -> None:
        try:
            self._send("Browser.close")
        except (RuntimeError, OSError):
            pass
        self._process.wait(timeout=30)
        os.close(self._commands)
        os.close(self._replies)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
