#!/usr/bin/python3
"""Hold many slow or idle connections on a `bicache serve` while real clients use it.

Slow connections send a request head one byte every --byte-interval seconds and never finish it;
idle ones send one complete keep-alive request, read the answer, then say nothing. Either kind is
opened again when the server closes it (a deadline), so the count stays up. While they are held,
a prober sends GET /health on a fresh connection --probe-rate times a second, and a client sends
small completions one after another. Prints one JSON object: connections held, probes answered
(within --probe-timeout) and their latency percentiles, completions answered.

Standard library only (docs/hardening.md, "Connections"; tests/cli/server_slow_clients.sh).
"""
import argparse
import http.client
import json
import selectors
import socket
import threading
import time

SLOW_HEAD = b"GET /health HTTP/1.1\r\nHost: slow\r\nX-Slow: "
IDLE_REQUEST = b"GET /health HTTP/1.1\r\nHost: idle\r\n\r\n"


class Held:
    """The slow and idle connections, driven by one selector loop."""

    def __init__(self, host, port, slow, idle, byte_interval):
        self.addr = (host, port)
        self.want = {"slow": slow, "idle": idle}
        self.byte_interval = byte_interval
        self.sel = selectors.DefaultSelector()
        self.conns = {}  # socket -> [kind, state, next_send]
        self.open = {"slow": 0, "idle": 0}  # connected and held
        self.reopened = 0
        self.samples = []  # (slow open, idle open) once a second
        self.stop = threading.Event()

    def connect(self, kind):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        try:
            s.connect_ex(self.addr)
        except OSError:
            s.close()
            return
        self.conns[s] = [kind, "connecting", 0.0]
        self.sel.register(s, selectors.EVENT_WRITE | selectors.EVENT_READ)

    def drop(self, s, reopen=True):
        kind, state, _ = self.conns.pop(s)
        if state == "held":
            self.open[kind] -= 1
        self.sel.unregister(s)
        s.close()
        if reopen and not self.stop.is_set():
            self.reopened += 1
            self.connect(kind)

    def on_event(self, s, mask, now):
        entry = self.conns[s]
        kind, state = entry[0], entry[1]
        if state == "connecting":
            if s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) != 0:
                return self.drop(s)
            entry[1] = "held"
            self.open[kind] += 1
            self.sel.modify(s, selectors.EVENT_READ)
            try:
                s.send(SLOW_HEAD if kind == "slow" else IDLE_REQUEST)
            except OSError:
                return self.drop(s)
            entry[2] = now + self.byte_interval
            return
        try:
            data = s.recv(65536)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            return self.drop(s)
        if not data:  # the server closed it: open another
            self.drop(s)

    def run(self):
        for kind, n in self.want.items():
            for _ in range(n):
                self.connect(kind)
        last_sample = time.monotonic()
        while not self.stop.is_set():
            now = time.monotonic()
            for key, mask in self.sel.select(timeout=0.05):
                if key.fileobj in self.conns:
                    self.on_event(key.fileobj, mask, now)
            for s, entry in list(self.conns.items()):
                if entry[0] == "slow" and entry[1] == "held" and now >= entry[2]:
                    entry[2] = now + self.byte_interval
                    try:
                        s.send(b"a")
                    except OSError:
                        self.drop(s)
            if now - last_sample >= 1.0:
                last_sample = now
                self.samples.append((self.open["slow"], self.open["idle"]))
        for s in list(self.conns):
            self.drop(s, reopen=False)


def percentile(values, p):
    if not values:
        return None
    v = sorted(values)
    return v[min(len(v) - 1, int(round(p / 100.0 * (len(v) - 1))))]


def prober(host, port, rate, timeout, stop, out, errors):
    while not stop.is_set():
        t0 = time.monotonic()
        ok = False
        try:
            c = http.client.HTTPConnection(host, port, timeout=timeout)
            c.request("GET", "/health", headers={"Connection": "close"})
            r = c.getresponse()
            r.read()
            ok = r.status == 200
            if not ok:
                errors["status %d" % r.status] = errors.get("status %d" % r.status, 0) + 1
            c.close()
        except (OSError, http.client.HTTPException) as e:
            errors[type(e).__name__] = errors.get(type(e).__name__, 0) + 1
        dt = time.monotonic() - t0
        out.append((ok and dt <= timeout, dt))
        time.sleep(max(0.0, 1.0 / rate - dt))


def completer(host, port, timeout, stop, out, body):
    # One kept-alive connection, as the SDKs use (a fresh one per request would churn through the
    # ephemeral ports fast enough to meet the server's TIME_WAIT sockets, which costs a SYN retry).
    c = None
    while not stop.is_set():
        t0 = time.monotonic()
        ok = False
        try:
            if c is None:
                c = http.client.HTTPConnection(host, port, timeout=timeout)
            c.request("POST", "/v1/completions", body=body, headers={"Content-Type": "application/json"})
            r = c.getresponse()
            r.read()
            ok = r.status == 200
            if r.will_close:
                c.close()
                c = None
        except (OSError, http.client.HTTPException):
            if c is not None:
                c.close()
            c = None
        out.append((ok, time.monotonic() - t0))
        if not ok:
            time.sleep(0.2)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("url", help="http://HOST:PORT of the server")
    ap.add_argument("--slow", type=int, default=500, help="slow-header connections held")
    ap.add_argument("--idle", type=int, default=500, help="idle keep-alive connections held")
    ap.add_argument("--byte-interval", type=float, default=2.0, help="seconds between a slow connection's bytes")
    ap.add_argument("--ramp", type=float, default=3.0, help="seconds to open the connections before probing")
    ap.add_argument("--seconds", type=float, default=30.0, help="seconds of probing while they are held")
    ap.add_argument("--probe-rate", type=float, default=10.0, help="/health probes a second")
    ap.add_argument("--probe-timeout", type=float, default=1.0, help="a probe slower than this counts as not answered")
    ap.add_argument("--completions", action="store_true", help="also run one completion client")
    ap.add_argument("--completion-body", default='{"prompt":"hi","max_tokens":4}')
    a = ap.parse_args()
    host, port = a.url.split("://", 1)[-1].rstrip("/").rsplit(":", 1)
    port = int(port)

    held = Held(host, port, a.slow, a.idle, a.byte_interval)
    loop = threading.Thread(target=held.run, daemon=True)
    loop.start()
    time.sleep(a.ramp)
    stop = threading.Event()
    probes, completions, probe_errors = [], [], {}
    threads = [threading.Thread(target=prober, args=(host, port, a.probe_rate, a.probe_timeout, stop, probes,
                                                     probe_errors), daemon=True)]
    if a.completions:
        threads.append(threading.Thread(target=completer,
                                        args=(host, port, 30.0, stop, completions, a.completion_body.encode()),
                                        daemon=True))
    samples_from = len(held.samples)
    for t in threads:
        t.start()
    time.sleep(a.seconds)
    stop.set()
    for t in threads:
        t.join(timeout=35)
    window = held.samples[samples_from:] or held.samples[-1:]
    held.stop.set()
    loop.join(timeout=10)
    lat_ms = [dt * 1000 for ok, dt in probes if ok]
    comp_ms = [dt * 1000 for ok, dt in completions if ok]
    report = {
        "slow_wanted": a.slow,
        "idle_wanted": a.idle,
        "held_min": min((s + i for s, i in window), default=0),
        "held_mean": round(sum(s + i for s, i in window) / max(1, len(window)), 1),
        "reopened": held.reopened,
        "probes_sent": len(probes),
        "probes_answered": sum(1 for ok, _ in probes if ok),
        "probe_errors": probe_errors,
        "health_p50_ms": None if not lat_ms else round(percentile(lat_ms, 50), 1),
        "health_p99_ms": None if not lat_ms else round(percentile(lat_ms, 99), 1),
        "health_max_ms": None if not lat_ms else round(max(lat_ms), 1),
        "completions_sent": len(completions),
        "completions_ok": len(comp_ms),
        "completion_p99_ms": None if not comp_ms else round(percentile(comp_ms, 99), 1),
    }
    print(json.dumps(report))


if __name__ == "__main__":
    main()
