"""Polls every PostgreSQL of crates/cli/tests/patroni.rs every 100 ms.

Usage: poll_roles.py PORT...  (on 127.0.0.1, user postgres, PGPASSWORD set)

Prints one line per round: the round's start and end as Unix time in ms,
then for each port in order P (answers pg_is_in_recovery() false: a primary
that accepts writes), R (true: a replica) or - (no answer). The test reads
the lines to check that no two nodes are ever primary at once and that the
primary stays put while the DCS loses its leader. One connection per node
is kept open (reconnecting after a failure), so a round costs a few ms.
Exits when its parent, the test, goes away.
"""

import os
import sys
import time

import psycopg2

PERIOD_S = 0.1


def main():
    ports = [int(port) for port in sys.argv[1:]]
    connections = [None] * len(ports)
    parent = os.getppid()

    def role(index):
        try:
            if connections[index] is None:
                connection = psycopg2.connect(
                    host="127.0.0.1",
                    port=ports[index],
                    user="postgres",
                    dbname="postgres",
                    connect_timeout=1,
                    options="-c statement_timeout=1000",
                )
                connection.autocommit = True
                connections[index] = connection
            with connections[index].cursor() as cursor:
                cursor.execute("SELECT pg_is_in_recovery()")
                return "R" if cursor.fetchone()[0] else "P"
        except psycopg2.Error:
            if connections[index] is not None:
                try:
                    connections[index].close()
                except psycopg2.Error:
                    pass
            connections[index] = None
            return "-"

    next_round = time.monotonic()
    while os.getppid() == parent:
        start_ms = int(time.time() * 1000)
        roles = [role(index) for index in range(len(ports))]
        end_ms = int(time.time() * 1000)
        print(start_ms, end_ms, " ".join(roles), flush=True)
        next_round += PERIOD_S
        time.sleep(max(0.0, next_round - time.monotonic()))


if __name__ == "__main__":
    main()
