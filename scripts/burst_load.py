#!/usr/bin/python3
"""Bursts of concurrent completions against a `bicache serve`: latency spread and listen overflows.

Sends --rounds bursts; each burst starts --concurrency clients at once (a barrier), each sending one
small completion (or, with --health, GET /health: no compute, the connection layer alone) on a
fresh connection (as a client without a connection pool does), and waits for them all before the
next. Prints one JSON object: the latency percentiles over every request, how
many failed, and how much the kernel's TCP listen-overflow and listen-drop counters rose during the
run (TcpExtListenOverflows / TcpExtListenDrops from /proc/net/netstat: machine-wide, so other
traffic on the machine counts too; the issue's burst of 32 raised them by 37 with the old internal
backlog of 5).

Standard library only (docs/serving.md, "The internal hop"; issue 45).
"""
import argparse
import http.client
import json
import threading
import time
from urllib.parse import urlparse


def listen_counters():
    with open("/proc/net/netstat") as f:
        lines = f.read().splitlines()
    for names, values in zip(lines[::2], lines[1::2]):
        if names.startswith("TcpExt:"):
            table = dict(zip(names.split()[1:], (int(v) for v in values.split()[1:])))
            return table.get("ListenOverflows", 0), table.get("ListenDrops", 0)
    return 0, 0


def one(host, port, body, headers, out, barrier):
    barrier.wait()
    t0 = time.monotonic()
    try:
        c = http.client.HTTPConnection(host, port, timeout=60)
        if body is None:
            c.request("GET", "/health")
        else:
            c.request("POST", "/v1/completions", body, headers)
        r = c.getresponse()
        r.read()
        ok = r.status == 200
        c.close()
    except OSError:
        ok = False
    out.append((time.monotonic() - t0, ok))


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))] if xs else None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("url")
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--max-tokens", type=int, default=4)
    ap.add_argument("--api-key", default="")
    ap.add_argument("--health", action="store_true",
                    help="GET /health instead of a completion: the connection layer alone")
    ap.add_argument("--histogram", action="store_true", help="also print the latencies in 50 ms bins")
    a = ap.parse_args()
    u = urlparse(a.url)
    body = None if a.health else json.dumps({"prompt": "hi", "max_tokens": a.max_tokens})
    headers = {"Content-Type": "application/json"}
    if a.api_key:
        headers["Authorization"] = "Bearer " + a.api_key
    before = listen_counters()
    results = []
    for _ in range(a.rounds):
        barrier = threading.Barrier(a.concurrency)
        threads = [
            threading.Thread(target=one, args=(u.hostname, u.port, body, headers, results, barrier))
            for _ in range(a.concurrency)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    after = listen_counters()
    ms = [t * 1000 for t, ok in results if ok]
    print(json.dumps({
        "requests": len(results),
        "failed": sum(1 for _, ok in results if not ok),
        "p50_ms": round(pct(ms, 50), 1) if ms else None,
        "p99_ms": round(pct(ms, 99), 1) if ms else None,
        "max_ms": round(max(ms), 1) if ms else None,
        "p99_minus_p50_ms": round(pct(ms, 99) - pct(ms, 50), 1) if ms else None,
        "listen_overflows": after[0] - before[0],
        "listen_drops": after[1] - before[1],
    }))
    if a.histogram:
        bins = {}
        for m in ms:
            bins[int(m // 50) * 50] = bins.get(int(m // 50) * 50, 0) + 1
        print(json.dumps({f"{k}-{k + 50} ms": v for k, v in sorted(bins.items())}))


if __name__ == "__main__":
    main()
