"""What the Python peers of loaderx-bench share, importing no loaderx (each
peer runs under its own loaderx release): memory readings and the timed
loader loop."""

import threading
import time

# How often the RSS monitor samples /proc/self/status.
RSS_POLL_S = 0.005


def proc_status_kb(field):
    with open("/proc/self/status", "rb") as f:
        for line in f:
            if line.startswith(field + b":"):
                return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {field.decode()} line")


class RssAnonPeak(threading.Thread):
    """Track the largest ``RssAnon`` seen while running."""

    def __init__(self):
        super().__init__(name="rss-anon-peak", daemon=True)
        self.peak_kb = proc_status_kb(b"RssAnon")
        self._stop_event = threading.Event()

    def run(self):
        while not self._stop_event.wait(RSS_POLL_S):
            self.peak_kb = max(self.peak_kb, proc_status_kb(b"RssAnon"))

    def stop(self):
        self._stop_event.set()
        self.join()
        self.peak_kb = max(self.peak_kb, proc_status_kb(b"RssAnon"))
        return self.peak_kb


def time_loader(next_batch, check, warmup, min_seconds):
    """Draws `warmup` batches, then batches for at least `min_seconds`,
    `check`ing each, while tracking ``RssAnon``; returns the loader result
    fields (`batches`, `seconds`, per-second rates are the caller's)."""
    monitor = RssAnonPeak()
    monitor.start()
    try:
        for _ in range(warmup):
            check(next_batch())
        batches = 0
        t0 = time.perf_counter()
        while True:
            check(next_batch())
            batches += 1
            seconds = time.perf_counter() - t0
            if seconds >= min_seconds:
                break
        peak_kb = monitor.stop()
    finally:
        if monitor.is_alive():
            monitor.stop()
    return {
        "batches": batches,
        "seconds": seconds,
        "batches_per_s": batches / seconds,
        "peak_rss_anon_bytes": peak_kb * 1024,
        "vm_hwm_bytes": proc_status_kb(b"VmHWM") * 1024,
    }
