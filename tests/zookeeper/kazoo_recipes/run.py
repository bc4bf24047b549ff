#!/usr/bin/env python3
"""Runs kazoo 2.10.0's own recipe tests against a running ZooKeeper cluster.

    python3 tests/zookeeper/kazoo_recipes/run.py --hosts 127.0.0.1:2181[,...]
        [--junit FILE] [--timeout SECONDS] [--module NAME ...] [-- PYTEST_ARGS]

The test files are kazoo's, unmodified, from its release on PyPI: the
sdist is downloaded into target/kazoo-src when missing (its sha256 is
checked) and unpacked there; nothing of it is kept in the repository.
Only the harness's cluster is redirected, by the pytest plugin
external_cluster.py beside this file, to the servers named by --hosts.

target/zk-venv (made when missing) gets what kazoo's test harness
imports and pytest needs: pytest, pytest-timeout (a hung test fails
instead of hanging the run), pyOpenSSL and pyjks (kazoo.testing.common
imports them at load time to make TLS certificates for the clusters it
starts; an external cluster never needs them).

Two more environment variables for kazoo's tests: CI=true and
ZOOKEEPER_VERSION=3.8.0 make kazoo.tests.util.CI_ZK_VERSION say which
server version is under test, so LockingQueue's setUp does not ask the
server with the `envi` four-letter word (Debian's ZooKeeper here has the
four-letter words off).

Prints pytest's own output, then one line per test
    RESULT passed|failed|skipped kazoo/tests/test_lock.py::KazooLockTests::test_lock
and a closing line "kazoo-recipes: N passed, N failed, N skipped".
Exits 0 when pytest ran every test (whatever their outcomes), 1 when
pytest itself could not run or collected nothing, 2 when a tool is
missing.
"""

import argparse
import hashlib
import os
import subprocess
import sys
import tarfile
import xml.etree.ElementTree as ET
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
TARGET = ROOT / "target"
VENV = TARGET / "zk-venv"
SRC = TARGET / "kazoo-src"

KAZOO = "kazoo==2.10.0"
SDIST = "kazoo-2.10.0.tar.gz"
SDIST_SHA256 = "905796ae4f4c12bd4e4ae92e6e5d018439e6b56c8cfbb24825362e79b230dab1"
UNPACKED = SRC / "kazoo-2.10.0"

# What the harness imports and what runs it (versions that were current
# when this was written; pinned so that every run uses the same).
TEST_PACKAGES = {
    "pytest": "pytest==9.2.0",
    "pytest_timeout": "pytest-timeout==2.4.0",
    "OpenSSL": "pyOpenSSL==26.4.0",
    "jks": "pyjks==20.0.0",
}

# The recipe test modules: Election; Lock, Semaphore; Barrier,
# DoubleBarrier; Counter; Party, ShallowParty; Queue, LockingQueue;
# DataWatch, ChildrenWatch, PatientChildrenWatch; SetPartitioner.
MODULES = [
    "test_election",
    "test_lock",
    "test_barrier",
    "test_counter",
    "test_party",
    "test_queue",
    "test_watchers",
    "test_partitioner",
]


def fail(message, code=2):
    print("run.py: " + message, file=sys.stderr, flush=True)
    sys.exit(code)


def venv_python():
    python = VENV / "bin" / "python"
    if not python.exists():
        print("== making %s" % VENV, flush=True)
        made = subprocess.run([sys.executable, "-m", "venv", str(VENV)])
        if made.returncode != 0 or not python.exists():
            fail(
                "python3 -m venv %s failed: install Debian's python3-venv" % VENV
            )
    missing = [
        requirement
        for module, requirement in TEST_PACKAGES.items()
        if subprocess.run(
            [str(python), "-c", "import " + module],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        ).returncode
        != 0
    ]
    if missing:
        print("== pip install %s" % " ".join(missing), flush=True)
        installed = subprocess.run(
            [str(python), "-m", "pip", "install", "--quiet"] + missing
        )
        if installed.returncode != 0:
            fail(
                "pip install %s into %s failed (PyPI must be reachable)"
                % (" ".join(missing), VENV)
            )
    return python


def sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 16), b""):
            digest.update(block)
    return digest.hexdigest()


def kazoo_source(python):
    """The unpacked release, downloaded and checked when missing."""
    if (UNPACKED / "kazoo" / "tests" / "test_lock.py").exists():
        return UNPACKED
    SRC.mkdir(parents=True, exist_ok=True)
    archive = SRC / SDIST
    if not archive.exists():
        print("== pip download %s (sdist) into %s" % (KAZOO, SRC), flush=True)
        downloaded = subprocess.run(
            [
                str(python), "-m", "pip", "download", "--quiet",
                "--no-binary", ":all:", "--no-deps", "-d", str(SRC), KAZOO,
            ]
        )
        if downloaded.returncode != 0 or not archive.exists():
            fail("pip download %s failed (PyPI must be reachable)" % KAZOO)
    got = sha256(archive)
    if got != SDIST_SHA256:
        archive.unlink()
        fail("%s has sha256 %s, not %s: removed" % (archive, got, SDIST_SHA256))
    with tarfile.open(archive) as tar:
        if hasattr(tarfile, "data_filter"):
            tar.extractall(SRC, filter="data")
        else:
            tar.extractall(SRC)
    return UNPACKED


def outcomes(junit):
    """(test id, passed|failed|skipped) from pytest's JUnit XML."""
    results = []
    for case in ET.parse(junit).getroot().iter("testcase"):
        # classname is "kazoo.tests.test_lock.KazooLockTests"
        module, _, cls = case.get("classname", "").rpartition(".")
        path = module.replace(".", "/") + ".py"
        test = "%s::%s::%s" % (path, cls, case.get("name"))
        tags = {child.tag for child in case}
        if tags & {"failure", "error"}:
            outcome = "failed"
        elif "skipped" in tags:
            outcome = "skipped"
        else:
            outcome = "passed"
        results.append((test, outcome))
    # A test whose teardown also failed appears twice: failed wins.
    merged = {}
    for test, outcome in results:
        if merged.get(test) != "failed":
            merged[test] = outcome
    return merged


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--hosts", required=True, help="host:port[,host:port...]")
    parser.add_argument("--junit", help="JUnit XML path (default under target/)")
    parser.add_argument(
        "--timeout", type=int, default=60, help="seconds one test may take"
    )
    parser.add_argument(
        "--module", action="append", choices=MODULES,
        help="run only these modules (repeatable); default: all of them",
    )
    parser.add_argument("pytest_args", nargs="*", help="more pytest arguments")
    args = parser.parse_args()

    python = venv_python()
    source = kazoo_source(python)
    modules = [
        "kazoo/tests/%s.py" % m
        for m in (args.module or MODULES)
        if (source / "kazoo" / "tests" / ("%s.py" % m)).exists()
    ]
    if not modules:
        fail("none of the recipe test modules is in %s" % source, code=1)
    junit = Path(args.junit) if args.junit else TARGET / "kazoo-recipes-junit.xml"
    junit = junit.resolve()
    junit.parent.mkdir(parents=True, exist_ok=True)
    if junit.exists():
        junit.unlink()

    env = dict(os.environ)
    # The release's kazoo package first (its tests import kazoo.tests.util
    # and kazoo.testing), then the plugin.
    env["PYTHONPATH"] = os.pathsep.join([str(source), str(HERE)])
    env["KAZOO_EXTERNAL_HOSTS"] = args.hosts
    env["CI"] = "true"
    env["ZOOKEEPER_VERSION"] = "3.8.0"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    command = [
        str(python), "-m", "pytest",
        "-p", "external_cluster",
        "-p", "no:cacheprovider",
        # The release's pyproject.toml turns on live INFO logging of every
        # client; its logs still show for a failing test.
        "-o", "log_cli=false",
        "-rfE", "--tb=short",
        "--timeout", str(args.timeout), "--timeout-method", "signal",
        "--junitxml", str(junit),
    ] + modules + args.pytest_args
    print("== %s   (in %s, hosts %s)" % (" ".join(command), source, args.hosts),
          flush=True)
    ran = subprocess.run(command, cwd=str(source), env=env)
    if not junit.exists():
        fail("pytest exited %d without a report" % ran.returncode, code=1)
    results = outcomes(junit)
    counts = {"passed": 0, "failed": 0, "skipped": 0}
    for test in sorted(results):
        counts[results[test]] += 1
        print("RESULT %s %s" % (results[test], test))
    print(
        "kazoo-recipes: %d passed, %d failed, %d skipped"
        % (counts["passed"], counts["failed"], counts["skipped"]),
        flush=True,
    )
    # pytest: 0 all passed, 1 some failed; anything else is an error.
    if ran.returncode not in (0, 1) or not results:
        sys.exit(1)


if __name__ == "__main__":
    main()
