"""A bare OTLP metrics receiver, for checking by hand what the OpenTelemetry
clients send (otlp_send.py, ../node/otlp_send.js); not used by the tests.

Usage: otlp_sink.py [--grpc] [--port P] [--save DIR]
Prints "listening PORT", then one JSON line per export: the HTTP path and
headers (or gRPC metadata) and the ExportMetricsServiceRequest as OTLP JSON
(camelCase, int64 as strings). OTLP/HTTP bodies may be protobuf or JSON,
gzip-compressed or not; --save DIR keeps each raw (decompressed) body.
"""
import argparse
import gzip
import json
import pathlib
import sys
import zlib
from concurrent import futures
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from google.protobuf import json_format
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2 as ms

a = argparse.ArgumentParser()
a.add_argument("--grpc", action="store_true")
a.add_argument("--port", type=int, default=0)
a.add_argument("--save")
a = a.parse_args()
seq = 0


def report(meta, raw, req):
    global seq
    seq += 1
    if a.save:
        ext = "json" if "json" in meta.get("content-type", "") else "bin"
        pathlib.Path(a.save, f"{seq:03}.{ext}").write_bytes(raw)
    print(json.dumps({"meta": meta, "size": len(raw), "body": json_format.MessageToDict(req)}), flush=True)


class Http(BaseHTTPRequestHandler):
    def do_POST(self):
        if self.headers.get("transfer-encoding", "").lower() == "chunked":  # Node sends this
            body = b""
            while size := int(self.rfile.readline().split(b";")[0], 16):
                body += self.rfile.read(size)
                self.rfile.readline()
            while self.rfile.readline() not in (b"\r\n", b""):  # trailers
                pass
        else:
            body = self.rfile.read(int(self.headers.get("content-length", 0)))
        enc, ctype = self.headers.get("content-encoding", ""), self.headers.get("content-type", "")
        if enc == "gzip":
            body = gzip.decompress(body)
        elif enc == "deflate":
            body = zlib.decompress(body)
        req = ms.ExportMetricsServiceRequest()
        try:
            if "json" in ctype:
                json_format.Parse(body, req, ignore_unknown_fields=True)
            else:
                req.ParseFromString(body)
        except Exception as e:  # answer 400, as a collector would
            print(json.dumps({"error": str(e), "size": len(body)}), flush=True)
            self.send_response(400)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        report({"path": self.path, **{k.lower(): v for k, v in self.headers.items()}}, body, req)
        out = ms.ExportMetricsServiceResponse()
        if "json" in ctype:
            out, ctype = json_format.MessageToJson(out).encode(), "application/json"
        else:
            out, ctype = out.SerializeToString(), "application/x-protobuf"
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *args):
        pass


if a.grpc:
    import grpc
    from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2_grpc as msg

    class Svc(msg.MetricsServiceServicer):
        def Export(self, request, context):
            report(dict(context.invocation_metadata()), request.SerializeToString(), request)
            return ms.ExportMetricsServiceResponse()

    server = grpc.server(futures.ThreadPoolExecutor(4))
    msg.add_MetricsServiceServicer_to_server(Svc(), server)
    port = server.add_insecure_port(f"127.0.0.1:{a.port}")
    server.start()
    print(f"listening {port}", flush=True)
    server.wait_for_termination()
else:
    httpd = ThreadingHTTPServer(("127.0.0.1", a.port), Http)
    print(f"listening {httpd.server_address[1]}", flush=True)
    httpd.serve_forever()
