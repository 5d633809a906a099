"""`make notebooks` starts JupyterLab on the course's top folder, labs and exercises both in
its file browser, as root too (JupyterLab refuses root without --allow-root)."""
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

from kernelcourse.lab import REPO

pytestmark = [pytest.mark.notebooks]

pytest.importorskip("jupyterlab", reason="jupyterlab is a dev dependency (make setup installs it)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url: str):
    with urllib.request.urlopen(url, timeout=5) as answer:
        return json.loads(answer.read())


def test_the_recipe_allows_root_only_for_root():
    recipe = subprocess.run(["make", "-n", "notebooks", f"PYTHON={sys.executable}"], cwd=REPO,
                            capture_output=True, text=True, check=True).stdout
    assert "--ServerApp.root_dir=." in recipe, recipe
    assert ("--allow-root" in recipe) == (os.getuid() == 0), recipe


def test_make_notebooks_serves_the_labs_and_the_exercises():
    port, token = free_port(), secrets.token_hex(16)
    args = f"--no-browser --ip=127.0.0.1 --port={port} --IdentityProvider.token={token}"
    server = subprocess.Popen(["make", "notebooks", f"PYTHON={sys.executable}", f"NOTEBOOK_ARGS={args}"],
                              cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              start_new_session=True)          # its own group: make and JupyterLab
    try:
        deadline, version = time.monotonic() + 120, None
        while version is None and time.monotonic() < deadline and server.poll() is None:
            try:
                version = get(f"http://127.0.0.1:{port}/api")["version"]
            except (urllib.error.URLError, ConnectionError):
                time.sleep(0.5)
        if version is None:
            server.kill()
            pytest.fail(f"JupyterLab did not answer on port {port}:\n{server.communicate()[0][-3000:]}")
        top = get(f"http://127.0.0.1:{port}/api/contents?token={token}")
        served = {item["name"] for item in top["content"] if item["type"] == "directory"}
        assert {"labs", "exercises"} <= served, served
        lab = get(f"http://127.0.0.1:{port}/api/contents/labs/01-naive?token={token}")
        assert "lab.ipynb" in {item["name"] for item in lab["content"]}
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGTERM)
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(server.pid, signal.SIGKILL)
                server.wait()
