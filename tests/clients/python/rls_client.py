"""Asks rollstat's rate-limit service as a Python service would: grpcio,
with stubs generated at run time by grpcio-tools from the protos rollstat
vendors (proto/envoy/), so both sides read the same .proto files.

Usage: rls_client.py HOST:PORT PROTO_DIR
Reads one JSON request per line on stdin ({"domain", "descriptors": [[[k, v],
...], ...], "hits_addend"}) and prints one JSON answer per line: {"overall":
"OK"|"OVER_LIMIT", "statuses": [[code, remaining, reset_ms], ...]} or
{"error": "INVALID_ARGUMENT", ...} for a refused call.
"""
import json
import pathlib
import sys
import tempfile

import grpc
from grpc_tools import protoc


def stubs(proto_dir: str, out: str):
    include = pathlib.Path(protoc.__file__).parent / "_proto"
    rc = protoc.main([
        "protoc", f"-I{proto_dir}", f"-I{include}", f"--python_out={out}",
        f"--grpc_python_out={out}",
        "envoy/service/ratelimit/v3/rls.proto",
        "envoy/extensions/common/ratelimit/v3/ratelimit.proto",
        "envoy/config/core/v3/base.proto",
        "envoy/type/v3/ratelimit_unit.proto",
    ])
    if rc != 0:
        sys.exit(f"protoc failed ({rc})")
    sys.path.insert(0, out)
    from envoy.service.ratelimit.v3 import rls_pb2, rls_pb2_grpc
    from envoy.extensions.common.ratelimit.v3 import ratelimit_pb2
    return rls_pb2, rls_pb2_grpc, ratelimit_pb2


def main():
    addr, proto_dir = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory() as out:
        rls_pb2, rls_pb2_grpc, ratelimit_pb2 = stubs(proto_dir, out)
        with grpc.insecure_channel(addr) as channel:
            stub = rls_pb2_grpc.RateLimitServiceStub(channel)
            code_name = rls_pb2.RateLimitResponse.Code.Name
            for line in sys.stdin:
                q = json.loads(line)
                req = rls_pb2.RateLimitRequest(domain=q["domain"], hits_addend=q.get("hits_addend", 0))
                for entries in q["descriptors"]:
                    d = req.descriptors.add()
                    for k, v in entries:
                        d.entries.add(key=k, value=v)
                try:
                    r = stub.ShouldRateLimit(req, timeout=5)
                except grpc.RpcError as e:
                    print(json.dumps({"error": e.code().name, "message": e.details()}), flush=True)
                    continue
                statuses = [
                    [code_name(s.code), s.limit_remaining,
                     s.duration_until_reset.seconds * 1000 + s.duration_until_reset.nanos // 1_000_000]
                    for s in r.statuses
                ]
                print(json.dumps({"overall": code_name(r.overall_code), "statuses": statuses}), flush=True)


if __name__ == "__main__":
    main()
