"""A remote write receiver for benches/push/run.sh: answers 204 to every
POST at once and appends `<unix time> <body bytes>` per request to the log
file it is given, so the bench can see when a push's batches arrive without
asking the daemon. Prints its port on stdout. Loopback only; it does not
decode the body. To a remote write 2.0 request it adds the
X-Prometheus-Remote-Write-*-Written headers a 2.0 receiver must send (so
that the daemon stays on 2.0), claiming everything written (it does not
count: the number is larger than any batch).
    python3 benches/push/sink.py LOG
"""
import http.server
import sys
import time

log = open(sys.argv[1], "a", buffering=1)


class Sink(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        n = int(self.headers.get("Content-Length", 0))
        self.rfile.read(n)
        self.send_response(204)
        if self.headers.get("X-Prometheus-Remote-Write-Version", "").startswith("2."):
            for kind in ("Samples", "Histograms", "Exemplars"):
                self.send_header(f"X-Prometheus-Remote-Write-{kind}-Written", "4294967295")
        self.send_header("Content-Length", "0")
        self.end_headers()
        log.write(f"{time.time():.6f} {n}\n")

    def log_message(self, *args):
        pass


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Sink)
print(server.server_address[1], flush=True)
server.serve_forever()
