"""``python -m celestial_memory.ops.healthcheck [host:port]``: exit 0 when the server reports SERVING
on the standard gRPC health service (the container's HEALTHCHECK; Kubernetes probes gRPC
directly)."""

from __future__ import annotations

import sys

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc


def main(argv: list[str]) -> int:
    target = argv[1] if len(argv) > 1 else "localhost:50051"
    try:
        with grpc.insecure_channel(target) as channel:
            resp = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service=""), timeout=3
            )
    except grpc.RpcError as err:
        print(f"unhealthy: {err.code().name}", file=sys.stderr)
        return 1
    ok = resp.status == health_pb2.HealthCheckResponse.SERVING
    print("serving" if ok else f"not serving ({resp.status})")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
