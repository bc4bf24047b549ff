"""A pytest plugin that points kazoo's test harness at a running cluster.

kazoo's test cases (kazoo.testing.KazooTestCase) ask
kazoo.testing.harness.get_global_cluster() for their cluster, which
normally writes zoo.cfg files and starts Java ZooKeeper processes. This
plugin replaces that one function with one that returns an
ExternalCluster: the servers named by the environment variable
KAZOO_EXTERNAL_HOSTS ("host:port,host:port,..."), already running and
never started, stopped or reset from here. Nothing else of the harness
or of the test files changes: every test still makes its own chrooted
namespace (/kazootests<uuid>) and its own clients.

Loaded with `pytest -p external_cluster` with this directory on
PYTHONPATH (run.py does that).

What an external cluster cannot do: stop or start its servers. The
recipe tests never ask for it (kazoo's test_client and test_connection
modules do); asking raises ExternalClusterError, which fails the test
with that message. kazoo's expire_session() and lose_connection() need
no server help: they make the client itself act as if its session had
expired or its connection had dropped, so they work here unchanged.
"""

import os

import kazoo.testing.harness


class ExternalClusterError(RuntimeError):
    pass


class ExternalServer:
    """One running server, as much of ManagedZooKeeper as the tests use."""

    def __init__(self, address):
        self.address = address
        self.host, _, port = address.rpartition(":")
        self.client_port = int(port)

    running = True

    @property
    def secure_address(self):
        raise ExternalClusterError(
            "the external cluster %s serves no TLS port" % self.address
        )

    def run(self):
        raise ExternalClusterError(
            "cannot start %s: it is an external server" % self.address
        )

    def stop(self):
        raise ExternalClusterError(
            "cannot stop %s: it is an external server" % self.address
        )

    reset = destroy = stop

    def get_logs(self, num_lines=100):
        return []


class ExternalCluster:
    """The running servers, as much of ZookeeperCluster as the tests use."""

    def __init__(self, hosts):
        self._servers = [
            ExternalServer(h.strip()) for h in hosts.split(",") if h.strip()
        ]
        if not self._servers:
            raise ExternalClusterError("KAZOO_EXTERNAL_HOSTS names no server")

    def __getitem__(self, k):
        return self._servers[k]

    def __iter__(self):
        return iter(self._servers)

    def start(self):
        raise ExternalClusterError(
            "cannot start the external cluster %s" % self.hosts
        )

    stop = start

    def terminate(self):
        # KazooTestCase.tearDownClass and an atexit handler call this to
        # stop a cluster the harness started; this one it did not start.
        pass

    def get_logs(self):
        return []

    @property
    def hosts(self):
        return ",".join(s.address for s in self._servers)


_CLUSTER = None


def _external_cluster():
    return _CLUSTER


def pytest_configure(config):
    global _CLUSTER
    hosts = os.environ.get("KAZOO_EXTERNAL_HOSTS", "")
    if not hosts:
        raise ExternalClusterError(
            "set KAZOO_EXTERNAL_HOSTS to the running cluster's host:port list"
        )
    _CLUSTER = ExternalCluster(hosts)
    kazoo.testing.harness.get_global_cluster = _external_cluster
