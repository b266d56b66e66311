"""DuckDB over the SQL benchmark's events as NDJSON, plain and compressed with zstd -3: the
peer issue 36 compares cobsfile's SQL with.

`cargo bench -p cobsfile-datafusion --bench sql` writes the events (`events.json`) to
`target/sql-bench/{MB}mb/`; this script compresses them with the `zstd` command (level 3,
kept for the next run) and runs the same queries in DuckDB (from PyPI) on 1 and 2 threads,
best of 3, printing a markdown table:

    python3 -m venv /tmp/bench-venv && /tmp/bench-venv/bin/pip install duckdb
    /tmp/bench-venv/bin/python benches/sql_duckdb.py target/sql-bench/1000mb

`once DIR QUERY THREADS` runs one query (`group by` or `filter`) once over the NDJSON.zst, in
a process of its own, for a timer that runs whole processes in turn (`farm-bench --vs`):

    /tmp/bench-venv/bin/python benches/sql_duckdb.py once target/sql-bench/1000mb filter 2
"""

import os
import subprocess
import sys
import time

import duckdb

QUERIES = [
    (
        "group by",
        "SELECT service, CAST(level AS VARCHAR) AS level, count(*), avg(latency_ms) FROM {t} "
        "GROUP BY service, CAST(level AS VARCHAR)",
    ),
    (
        "filter",
        "SELECT ts, host, msg FROM {t} WHERE request_id = '00000000deadbeef' OR "
        "(CAST(level AS VARCHAR) = 'error' AND latency_ms > 999.98)",
    ),
    ("count(*)", "SELECT count(*) FROM {t}"),
]


def best(con, sql, runs=3):
    took = float("inf")
    rows = 0
    for _ in range(runs):
        start = time.perf_counter()
        rows = len(con.sql(sql).fetchall())
        took = min(took, time.perf_counter() - start)
    return took, rows


def once(data, label, threads):
    packed = os.path.join(data, "events.json.zst")
    sql = dict(QUERIES)[label].replace("{t}", f"read_ndjson('{packed}')")
    con = duckdb.connect()
    con.execute(f"SET threads = {int(threads)}")
    print(f"{len(con.sql(sql).fetchall())} rows")


def main():
    if len(sys.argv) == 5 and sys.argv[1] == "once":
        return once(*sys.argv[2:])
    data = sys.argv[1] if len(sys.argv) > 1 else "target/sql-bench/1000mb"
    plain = os.path.join(data, "events.json")
    packed = plain + ".zst"
    if not os.path.exists(packed):
        subprocess.run(["zstd", "-q", "-3", plain, "-o", packed], check=True)
    tables = [
        ("NDJSON", f"read_ndjson('{plain}')", plain),
        ("NDJSON, zstd -3", f"read_ndjson('{packed}')", packed),
    ]
    print(f"DuckDB {duckdb.__version__}, data {data}\n")
    for label, sql in QUERIES:
        print(f"### {label}\n")
        print("| table | bytes | rows | 1 thread (ms) | 2 threads (ms) |")
        print("|---|---:|---:|---:|---:|")
        for name, source, path in tables:
            ms = []
            for threads in (1, 2):
                con = duckdb.connect()
                con.execute(f"SET threads = {threads}")
                took, rows = best(con, sql.replace("{t}", source))
                ms.append(took * 1e3)
            size = os.path.getsize(path)
            print(f"| DuckDB, {name} | {size:,} | {rows} | {ms[0]:,.0f} | {ms[1]:,.0f} |")
        print()


if __name__ == "__main__":
    main()
