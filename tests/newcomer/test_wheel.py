"""Installed from a wheel, astra has its templates: the wheel is built (offline: no build
isolation, hatchling from the test extra), installed into a fresh venv, and lists them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

from .conftest import ROOT


def test_the_wheel_ships_the_templates_and_a_fresh_install_lists_them(tmp_path):
    wheels = tmp_path / "wheels"
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", wheels, ROOT],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stderr
    (wheel,) = wheels.glob("astra_reconciler-*.whl")
    venv = tmp_path / "fresh"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True, timeout=120)
    python = venv / "bin" / "python"
    installed = subprocess.run(
        [sys.executable, "-m", "pip", "--python", python, "install", "-q", "--no-deps", "--no-index", wheel],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert installed.returncode == 0, installed.stderr
    # its dependencies: this venv's (read after its own site-packages, which hold astra)
    site = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    Path(site, "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    empty = tmp_path / "somewhere"
    empty.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ASTRA_", "PYTHON"))}
    listed = subprocess.run(
        [venv / "bin" / "astra", "template", "list", "-o", "json"],
        cwd=empty,
        env={**env, "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert listed.returncode == 0, listed.stderr
    templates = json.loads(listed.stdout)
    assert [t["name"] for t in templates] == ["gang", "service", "sweep"]
    shipped = Path(site) / "reconciler" / "templates" / "shipped"
    assert all(Path(t["file"]).parent == shipped for t in templates), templates  # not this checkout's
    assert [t["parameters"]["gpus"]["required"] for t in templates if t["name"] == "gang"] == [True]
